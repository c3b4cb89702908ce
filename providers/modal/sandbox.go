package modal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	sdk "github.com/modal-labs/modal-client/go"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Sandbox      = (*sandbox)(nil)
	_ driver.TreeUploader = (*sandbox)(nil)
)

// sandbox is a handle to one Modal sandbox.
type sandbox struct {
	p  *Provider
	sb *sdk.Sandbox
	// ctx bounds the handle's background work; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	tun    tunnels
}

func (p *Provider) handle(sb *sdk.Sandbox) *sandbox {
	ctx, cancel := context.WithCancel(p.ctx)
	s := &sandbox{p: p, sb: sb, ctx: ctx, cancel: cancel}
	p.mu.Lock()
	p.handles[s] = true
	p.mu.Unlock()
	return s
}

func (s *sandbox) ID() string { return s.sb.SandboxID }

// Close drops the handle's connection; the sandbox keeps running. It may
// run twice (the wrapper, then the provider's Close); Detach is idempotent.
func (s *sandbox) Close() error {
	s.cancel()
	s.p.mu.Lock()
	delete(s.p.handles, s)
	s.p.mu.Unlock()
	return s.sb.Detach()
}

// Delete terminates the sandbox.
func (s *sandbox) Delete(ctx context.Context) error { return terminate(ctx, s.sb) }

// WriteFile writes the file, then sets its mode with chmod when it is not
// the 0644 the file tool creates files with.
func (s *sandbox) WriteFile(ctx context.Context, p string, r io.Reader, mode uint32) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read the data to write: %w", err)
	}
	if err := s.sb.Filesystem.WriteBytes(ctx, data, p, nil); err != nil {
		return classify(err)
	}
	if mode&0o7777 == 0o644 {
		return nil
	}
	return s.chmod(ctx, p, mode&0o7777)
}

// chmod runs chmod in the sandbox: the file tool has no mode parameter. It
// runs in the file's directory on the base name, so the command needs no
// absolute path (and works wherever the sandbox keeps its tree).
func (s *sandbox) chmod(ctx context.Context, p string, mode uint32) error {
	return s.run(ctx, driver.Command{Args: []string{"chmod", fmt.Sprintf("%o", mode), "--", path.Base(p)}, Dir: path.Dir(p)})
}

// run runs a helper command to completion; a non-zero exit is an error
// carrying the command's stderr.
func (s *sandbox) run(ctx context.Context, cmd driver.Command) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	p, err := s.Exec(ctx, cmd)
	if err != nil {
		return err
	}
	code, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 127:
		return errdefs.Errorf(errdefs.NotSupported, "%s is not in the sandbox's image", cmd.Args[0])
	}
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > 1024 {
		msg = "..." + msg[len(msg)-1024:]
	}
	return fmt.Errorf("%s exited %d: %s", strings.Join(cmd.Args, " "), code, msg)
}

// UploadTar unpacks a checked archive (package sandbox refuses escaping
// names before the driver sees them) with tar in the sandbox: one command
// for the whole tree, links included, where file calls would cost several
// round trips per file.
func (s *sandbox) UploadTar(ctx context.Context, dir string, r io.Reader) error {
	if err := s.MakeDir(ctx, dir); err != nil && !errors.Is(err, errdefs.ErrAlreadyExists) {
		return err
	}
	// -o: files belong to the sandbox's user, not the archive's owners.
	return s.run(ctx, driver.Command{Args: []string{"tar", "-xof", "-"}, Dir: dir, Stdin: r})
}

// ReadFile reads the whole file.
func (s *sandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	data, err := s.sb.Filesystem.ReadBytes(ctx, p, nil)
	if err != nil {
		return nil, classify(err)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Stat describes the path itself, not a symlink's target.
func (s *sandbox) Stat(ctx context.Context, p string) (driver.FileInfo, error) {
	fi, err := s.sb.Filesystem.Stat(ctx, p, nil)
	if err != nil {
		return driver.FileInfo{}, classify(err)
	}
	return fileInfo(*fi), nil
}

// ListDir lists a directory's entries, sorted by name.
func (s *sandbox) ListDir(ctx context.Context, p string) ([]driver.FileInfo, error) {
	fis, err := s.sb.Filesystem.ListFiles(ctx, p, nil)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]driver.FileInfo, len(fis))
	for i, fi := range fis {
		out[i] = fileInfo(fi)
	}
	slices.SortFunc(out, func(a, b driver.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// MakeDir creates the directory and its parents; an existing path is
// AlreadyExists. The SDK's MakeDirectory with parents succeeds on an
// existing directory, so it first tries without: that tells "exists" from
// "a parent is missing".
func (s *sandbox) MakeDir(ctx context.Context, p string) error {
	no, yes := false, true
	err := s.sb.Filesystem.MakeDirectory(ctx, p, &sdk.SandboxFilesystemMakeDirectoryParams{CreateParents: &no})
	if as[sdk.SandboxFilesystemNotFoundError](err) {
		err = s.sb.Filesystem.MakeDirectory(ctx, p, &sdk.SandboxFilesystemMakeDirectoryParams{CreateParents: &yes})
	}
	return classify(err)
}

// Remove deletes a file or a directory tree.
func (s *sandbox) Remove(ctx context.Context, p string) error {
	return classify(s.sb.Filesystem.Remove(ctx, p, &sdk.SandboxFilesystemRemoveParams{Recursive: true}))
}

// fileInfo converts the SDK's description; its Mode is st_mode.
func fileInfo(fi sdk.FileInfo) driver.FileInfo {
	out := driver.FileInfo{
		Name: fi.Name,
		Path: fi.Path,
		Size: fi.Size,
		Mode: fi.Mode & 0o7777,
		Type: driver.FileOther,
	}
	if fi.ModifiedTime > 0 {
		sec, frac := int64(fi.ModifiedTime), fi.ModifiedTime-float64(int64(fi.ModifiedTime))
		out.ModTime = time.Unix(sec, int64(frac*1e9))
	}
	switch fi.Type {
	case sdk.FileTypeFile:
		out.Type = driver.FileRegular
	case sdk.FileTypeDirectory:
		out.Type = driver.FileDir
	case sdk.FileTypeSymlink:
		out.Type = driver.FileSymlink
		if fi.SymlinkTarget != nil {
			out.Target = *fi.SymlinkTarget
		}
	}
	return out
}
