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
)

func (a *app) cpCmd() *cobra.Command {
	var backend string
	cmd := &cobra.Command{
		Use:   "cp [--backend NAME] SRC DST",
		Short: "Copy a file or a tree between the host and a sandbox (ID:/path)",
		Long: `Copy a file or a directory tree between the host and a sandbox. The sandbox
side is written ID:/absolute/path; exactly one side must be a sandbox.

Copying into a sandbox: a file lands at DST (parents created), a directory's
contents land under DST. Copying out: a file is written to DST, a directory's
contents are extracted under DST, and nothing in the sandbox (symlinks,
"../" names) can make berth write outside DST.`,
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
			return classExit(a.copyOut(cmd.Context(), sb, spath, dst))
		}),
	}
	a.backendFlag(cmd, &backend)
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

func (a *app) copyOut(ctx context.Context, sb *sandbox.Sandbox, src, host string) error {
	fi, err := sb.Stat(ctx, src)
	if err != nil {
		return err
	}
	if fi.Type == sandbox.FileDir {
		if host == "-" {
			return sandbox.Errorf(sandbox.InvalidArgument, "%s is a directory; give a host directory, not -", src)
		}
		return sb.DownloadDir(ctx, src, host)
	}
	rc, err := sb.Open(ctx, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	if host == "-" {
		_, err = io.Copy(a.stdout, rc)
		return err
	}
	if st, err := os.Stat(host); err == nil && st.IsDir() {
		host = filepath.Join(host, path.Base(src))
	}
	f, err := os.OpenFile(host, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(fi.Mode&0o777))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return f.Close()
}
