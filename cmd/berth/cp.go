package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

// defaultCpMaxMB bounds what `berth cp` copies out of a sandbox.
const defaultCpMaxMB = 4096

func (a *app) cpCmd() *cobra.Command {
	var backend string
	var maxMB int64
	cmd := &cobra.Command{
		Use:   "cp [--backend NAME] SRC DST",
		Short: "Copy a file or a tree between the host and a sandbox (ID:/path)",
		Long: `Copy a file or a directory tree between the host and a sandbox. The sandbox
side is written ID:/absolute/path; exactly one side must be a sandbox.

Copying into a sandbox: a file lands at DST (parents created), a directory's
contents land under DST. Copying out: a file is written to DST, a directory's
contents are extracted under DST, and nothing in the sandbox (symlinks,
link chains, "../" names) can make berth write outside DST or leave a
link there that leads out of it. What comes out is bounded: at most
--max-download-mb MB of files (counted from each file's declared size, so
a sparse file is refused before it is read), no set-id, sticky or
world-writable bits.`,
		Example: `  berth cp ./solution $id:/solution
  berth cp $id:/logs/verifier ./verifier
  berth cp $id:/etc/os-release -`,
		Args: cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			src, dst := args[0], args[1]
			sid, spath, sIn := splitRemote(src)
			did, dpath, dIn := splitRemote(dst)
			if sIn == dIn {
				return usageError(errors.New("exactly one of SRC and DST must be ID:/path in a sandbox"))
			}
			if maxMB == 0 || maxMB < -1 {
				return usageError(errors.New("--max-download-mb is a number of MB, or -1 for no bound"))
			}
			id := sid
			if dIn {
				id = did
			}
			p, err := a.open(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer p.Close()
			sb, err := p.Connect(cmd.Context(), id)
			if err != nil {
				return classExit(err)
			}
			defer sb.Close()
			if dIn {
				return classExit(copyIn(cmd.Context(), sb, src, dpath))
			}
			return classExit(a.copyOut(cmd.Context(), sb, spath, dst, maxMB))
		}),
	}
	a.backendFlag(cmd, &backend)
	cmd.Flags().Int64Var(&maxMB, "max-download-mb", defaultCpMaxMB, "copying out: stop past this many MB of files (-1: no bound)")
	return cmd
}

// splitRemote recognises ID:/path. A host path containing ':' before its
// first '/' is rare; write it as ./name to force the host side.
func splitRemote(s string) (id, p string, ok bool) {
	i := strings.Index(s, ":")
	if i <= 0 || strings.ContainsAny(s[:i], "/.") {
		return "", "", false
	}
	p = s[i+1:]
	if !path.IsAbs(p) {
		return "", "", false
	}
	return s[:i], p, true
}

func copyIn(ctx context.Context, sb *sandbox.Sandbox, host, dst string) error {
	fi, err := os.Stat(host)
	if err != nil {
		return sandbox.Classify(sandbox.InvalidArgument, err)
	}
	if fi.IsDir() {
		return sb.UploadDir(ctx, host, dst)
	}
	f, err := os.Open(host)
	if err != nil {
		return err
	}
	defer f.Close()
	return sb.WriteFrom(ctx, dst, f, fi.Mode().Perm())
}

func (a *app) copyOut(ctx context.Context, sb *sandbox.Sandbox, src, host string, maxMB int64) error {
	limit := int64(-1)
	if maxMB >= 0 {
		limit = maxMB << 20
	}
	fi, err := sb.Stat(ctx, src)
	if err != nil {
		return err
	}
	if fi.Type == sandbox.FileDir {
		if host == "-" {
			return sandbox.Errorf(sandbox.InvalidArgument, "%s is a directory; give a host directory, not -", src)
		}
		return copyTreeOut(ctx, sb, src, host, limit)
	}
	if limit >= 0 && fi.Size > limit {
		return overLimit(src, limit)
	}
	rc, err := sb.Open(ctx, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	// The stat was of a file the sandbox can still grow (or of a link):
	// the bound is on what is read.
	r := io.Reader(rc)
	if limit >= 0 {
		r = io.LimitReader(rc, limit+1)
	}
	if host == "-" {
		n, err := io.Copy(a.stdout, r)
		if err == nil && limit >= 0 && n > limit {
			return overLimit(src, limit)
		}
		return err
	}
	if st, err := os.Stat(host); err == nil && st.IsDir() {
		host = filepath.Join(host, path.Base(src))
	}
	// No set-id, sticky or world-writable bit from the sandbox.
	mode := os.FileMode(fi.Mode&0o777) &^ 0o002
	f, err := os.OpenFile(host, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if err == nil && limit >= 0 && n > limit {
		err = overLimit(src, limit)
	}
	if err == nil {
		err = f.Chmod(mode) // an existing file keeps its mode through OpenFile
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(host) // a cut copy is no copy
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// copyTreeOut extracts the sandbox's tree at src under the host directory
// host, within limit bytes (-1: none).
func copyTreeOut(ctx context.Context, sb *sandbox.Sandbox, src, host string, limit int64) error {
	rc, err := sb.Download(ctx, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := os.MkdirAll(host, 0o755); err != nil {
		return sandbox.Classify(sandbox.InvalidArgument, err)
	}
	root, err := os.OpenRoot(host)
	if err != nil {
		return sandbox.Classify(sandbox.InvalidArgument, err)
	}
	defer root.Close()
	st, err := hosttar.ExtractWith(ctx, root, rc, hosttar.Options{MaxBytes: max(limit, 0)})
	var le *hosttar.LimitError
	if errors.As(err, &le) && le.What == "bytes" {
		return fmt.Errorf("%w; copied the %d files (%s) before it into %s; raise the bound with --max-download-mb", err, st.Files, hosttar.FormatBytes(st.Bytes), host)
	}
	return err
}

func overLimit(src string, limit int64) error {
	return sandbox.Errorf(sandbox.ResourceExhausted, "%s is over the %s bound of berth cp; raise it with --max-download-mb (-1: no bound)", src, hosttar.FormatBytes(limit))
}
