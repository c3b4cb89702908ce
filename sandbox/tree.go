package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strings"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

// Upload unpacks a tar stream into the absolute directory dir, creating it.
// Entry names must be relative and stay under dir: absolute names and names
// with a ".." element are refused as InvalidArgument, as is any entry that
// passes through a symlink made earlier in the same archive. Drivers that
// unpack archives themselves (driver.TreeUploader) get the checked stream;
// for the others Upload makes directories and writes files one call at a
// time and refuses links as NotSupported. An error stops the upload; entries
// before it stay written.
func (s *Sandbox) Upload(ctx context.Context, dir string, tarStream io.Reader) error {
	const op = "upload"
	end, err := s.beginPath(op, dir)
	if err != nil {
		return err
	}
	defer end()
	dir = path.Clean(dir)
	if u, ok := s.d.(driver.TreeUploader); ok {
		return s.wrap(uploadChecked(ctx, u, dir, tarStream), op)
	}
	return s.wrap(s.uploadFiles(ctx, dir, tarStream), op)
}

// uploadChecked re-streams the archive through the name checks into the
// driver, so that a driver's extractor never sees an entry we would refuse.
func uploadChecked(ctx context.Context, u driver.TreeUploader, dir string, r io.Reader) error {
	pr, pw := io.Pipe()
	filterErr := make(chan error, 1)
	go func() {
		err := filterTar(pw, r)
		pw.CloseWithError(err)
		filterErr <- err
	}()
	err := u.UploadTar(ctx, dir, pr)
	// Unblock the filter if the driver stopped reading early.
	pr.CloseWithError(errUploadEnded)
	if ferr := <-filterErr; ferr != nil && !errors.Is(ferr, errUploadEnded) {
		// The refused entry is the real cause of whatever the driver saw.
		return ferr
	}
	return err
}

var errUploadEnded = errors.New("upload ended")

func filterTar(w io.Writer, r io.Reader) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	links := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return hosttar.ReadError(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := checkEntry(hdr, links)
		if err != nil {
			return err
		}
		out := &tar.Header{
			Typeflag: hdr.Typeflag, Name: name, Linkname: hdr.Linkname, Size: hdr.Size,
			Mode: hdr.Mode, ModTime: hdr.ModTime, Devmajor: hdr.Devmajor, Devminor: hdr.Devminor,
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
		case tar.TypeSymlink:
			links[name] = true
		case tar.TypeLink:
			out.Linkname, _ = hosttar.CleanName(hdr.Linkname)
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
		}
	}
}

// checkEntry cleans an entry name and refuses names that escape, and names
// or hard link targets that pass through a symlink of this archive.
func checkEntry(hdr *tar.Header, links map[string]bool) (string, error) {
	name, err := hosttar.CleanName(hdr.Name)
	if err != nil {
		return "", err
	}
	check := []string{name}
	if hdr.Typeflag == tar.TypeLink {
		old, err := hosttar.CleanName(hdr.Linkname)
		if err != nil {
			return "", err
		}
		check = append(check, old)
	}
	for _, n := range check {
		for _, a := range hosttar.Ancestors(n) {
			if links[a] {
				return "", Errorf(InvalidArgument, "tar entry %q passes through the symlink %q", n, a)
			}
		}
	}
	return name, nil
}

// uploadFiles is the fallback for drivers without TreeUploader.
func (s *Sandbox) uploadFiles(ctx context.Context, dir string, r io.Reader) error {
	if err := ignoreExists(s.d.MakeDir(ctx, dir)); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return hosttar.ReadError(err)
		}
		name, err := hosttar.CleanName(hdr.Name)
		if err != nil {
			return err
		}
		target := path.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader:
		case tar.TypeDir:
			if err := ignoreExists(s.d.MakeDir(ctx, target)); err != nil {
				return err
			}
		case tar.TypeReg:
			if name == "." {
				return Errorf(InvalidArgument, "tar entry %q is a file in place of the directory itself", hdr.Name)
			}
			if err := s.d.WriteFile(ctx, target, tr, uint32(hdr.Mode)&0o777); err != nil {
				return err
			}
		case tar.TypeSymlink, tar.TypeLink:
			return Errorf(NotSupported, "tar entry %q is a link; this provider takes trees through plain file calls, which cannot make links", hdr.Name)
		default:
			return Errorf(NotSupported, "tar entry %q has type %q; only directories and regular files can be uploaded to this provider", hdr.Name, hdr.Typeflag)
		}
	}
}

func ignoreExists(err error) error {
	if errors.Is(err, ErrAlreadyExists) {
		return nil
	}
	return err
}

// Download returns a tar stream of the file or directory at the absolute
// path; the caller closes it. Entry names are relative to path (a single
// file is its base name). A missing path is NotFound before any byte is
// read. Drivers that archive trees themselves (driver.TreeDownloader) are
// used directly; for the others the tree is walked with ListDir and ReadFile
// and streamed as it is read.
func (s *Sandbox) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	const op = "download"
	end, err := s.beginPath(op, p)
	if err != nil {
		return nil, err
	}
	defer end()
	p = path.Clean(p)
	if d, ok := s.d.(driver.TreeDownloader); ok {
		rc, err := d.DownloadTar(ctx, p)
		if err != nil {
			return nil, s.wrap(err, op)
		}
		return &wrapReader{rc: rc, s: s, op: op}, nil
	}
	fi, err := s.d.Stat(ctx, p)
	if err != nil {
		return nil, s.wrap(err, op)
	}
	rc := hosttar.Stream(ctx, func(ctx context.Context, w io.Writer) error {
		tw := tar.NewWriter(w)
		if err := s.walkTar(ctx, tw, p, "", fi); err != nil {
			return err
		}
		return tw.Close()
	})
	return &wrapReader{rc: rc, s: s, op: op}, nil
}

// walkTar writes the entry for the sandbox path p (already described by fi)
// under the archive name rel ("" for the root of the download) and, for a
// directory, everything below it.
func (s *Sandbox) walkTar(ctx context.Context, tw *tar.Writer, p, rel string, fi FileInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := rel
	if name == "" {
		name = path.Base(p)
	}
	hdr := &tar.Header{Name: name, Mode: int64(fi.Mode & 0o7777), ModTime: fi.ModTime}
	switch fi.Type {
	case FileDir:
		if rel != "" {
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		}
		entries, err := s.d.ListDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Name == "" || e.Name == "." || e.Name == ".." || strings.Contains(e.Name, "/") {
				return Errorf(InvalidArgument, "directory %q lists a bad entry name %q", p, e.Name)
			}
			if err := s.walkTar(ctx, tw, path.Join(p, e.Name), path.Join(rel, e.Name), e); err != nil {
				return err
			}
		}
		return nil
	case FileSymlink:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, fi.Target
		return tw.WriteHeader(hdr)
	case FileRegular:
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		rc, err := s.d.ReadFile(ctx, p)
		if err != nil {
			return err
		}
		defer rc.Close()
		// The header promised Size bytes: a file that shrank since the
		// listing breaks the archive; one that grew is cut at that size.
		if _, err := io.CopyN(tw, rc, fi.Size); err != nil {
			if errors.Is(err, io.EOF) {
				return Errorf(Unavailable, "%q shrank while it was being downloaded", p)
			}
			return err
		}
		return nil
	default:
		return nil // sockets, devices: nothing to carry
	}
}

// wrapReader attaches op, provider and sandbox ID to stream errors.
type wrapReader struct {
	rc io.ReadCloser
	s  *Sandbox
	op string
}

func (r *wrapReader) Read(b []byte) (int, error) {
	n, err := r.rc.Read(b)
	if err != nil && err != io.EOF {
		err = r.s.wrap(err, r.op)
	}
	return n, err
}

func (r *wrapReader) Close() error { return r.s.wrap(r.rc.Close(), r.op) }

// UploadDir uploads the host directory hostDir into the absolute sandbox
// directory dir. Host symlinks travel as links (which providers without
// TreeUploader refuse); the host side is read through os.Root, so nothing
// outside hostDir is read.
func (s *Sandbox) UploadDir(ctx context.Context, hostDir, dir string) error {
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return s.wrap(Classify(NotFound, err), "upload dir")
	}
	defer root.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(hosttar.Write(ctx, pw, root, "."))
	}()
	err = s.Upload(ctx, dir, pr)
	pr.Close()
	cancel()
	<-done
	return err
}

// DownloadDir downloads the sandbox path p into the host directory hostDir,
// creating it. Extraction goes through os.Root and refuses entries that
// escape, absolute or escaping symlinks and entries through symlinks, so
// nothing a sandbox planted can write outside hostDir.
func (s *Sandbox) DownloadDir(ctx context.Context, p, hostDir string) error {
	const op = "download dir"
	rc, err := s.Download(ctx, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return s.wrap(Classify(InvalidArgument, err), op)
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return s.wrap(Classify(InvalidArgument, err), op)
	}
	defer root.Close()
	return s.wrap(hosttar.Extract(ctx, root, rc), op)
}
