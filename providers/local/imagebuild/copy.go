package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/internal/passwd"
	"github.com/berth-sh/berth/providers/local/dockerfile"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// copy runs COPY or ADD: context files to a destination in the sandbox,
// owned by root (or --chown) with their own modes (or --chmod) and
// modification times. A directory source copies its contents. ADD of a
// tar archive (plain, gzip, bzip2 or zstd) extracts it instead.
func (b *builder) copy(ctx context.Context, st *buildState, croot *os.Root, in dockerfile.Instruction) error {
	o, err := b.copyOwner(in)
	if err != nil {
		return err
	}
	srcs, err := sources(croot, in)
	if err != nil {
		return err
	}
	destArg := in.Args[len(in.Args)-1]
	dest := path.Clean(destArg)
	if !path.IsAbs(dest) {
		dest = path.Join(st.dir(), dest)
	}
	intoDir := strings.HasSuffix(destArg, "/") || strings.HasSuffix(destArg, "/.") || len(srcs)+len(in.Heredocs) > 1 || b.tree.isDir(dest)
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.copySource(ctx, croot, in, src, dest, intoDir, o); err != nil {
			if errdefs.ClassOf(err) == errdefs.Unknown {
				return stepErr(in, errdefs.InvalidArgument, "%s: %v", src, err)
			}
			return err
		}
	}
	for _, h := range in.Heredocs {
		if err := b.copyHeredoc(h, dest, intoDir, o); err != nil {
			return stepErr(in, errdefs.InvalidArgument, "<<%s: %v", h.Name, err)
		}
	}
	return nil
}

// copyHeredoc writes an inline source (COPY <<EOF dest) as Docker does: a
// file named after the heredoc in a directory destination, mode 0644
// unless --chmod, owned as --chown says.
func (b *builder) copyHeredoc(h dockerfile.Heredoc, dest string, intoDir bool, o owner) error {
	target := dest
	if intoDir {
		target = path.Join(dest, path.Base(h.Name))
		if err := b.tree.mkdirAll(dest, owner{uid: o.uid, gid: o.gid, mode: 0o755, hasMode: true}); err != nil {
			return err
		}
	} else if err := b.tree.mkdirAll(path.Dir(dest), owner{mode: 0o755, hasMode: true}); err != nil {
		return err
	}
	return b.tree.file(target, strings.NewReader(h.Data), owner{uid: o.uid, gid: o.gid, mode: o.modeOr(0o644), hasMode: true}, time.Time{})
}

func (b *builder) copySource(ctx context.Context, croot *os.Root, in dockerfile.Instruction, src, dest string, intoDir bool, o owner) error {
	fi, err := croot.Stat(rootRel(src))
	if err != nil {
		return stepErr(in, errdefs.InvalidArgument, "%s: %v", src, err)
	}
	if in.Cmd == "ADD" && fi.Mode().IsRegular() {
		done, err := b.addArchive(ctx, croot, in, src, dest)
		if done || err != nil {
			return err
		}
	}
	if !fi.IsDir() {
		target := dest
		if intoDir {
			target = path.Join(dest, path.Base(src))
			if err := b.tree.mkdirAll(dest, owner{uid: o.uid, gid: o.gid, mode: 0o755, hasMode: true}); err != nil {
				return err
			}
		} else if err := b.tree.mkdirAll(path.Dir(dest), owner{mode: 0o755, hasMode: true}); err != nil {
			return err
		}
		return b.copyFile(croot, src, fi, target, o)
	}
	// A directory: its contents go into dest, made if missing.
	return walkContext(croot, src, func(e ctxEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		target := dest
		if e.rel != src {
			sub := e.rel
			if src != "." {
				sub = strings.TrimPrefix(e.rel, src+"/")
			}
			target = path.Join(dest, sub)
		}
		mode := o.modeOr(dirfd.UnixMode(e.info.Mode()))
		switch {
		case e.rel == src:
			return b.tree.mkdirAll(dest, owner{uid: o.uid, gid: o.gid, mode: mode, hasMode: true})
		case e.info.IsDir():
			return b.tree.dir(target, owner{uid: o.uid, gid: o.gid, mode: mode, hasMode: true}, time.Time{})
		case e.info.Mode()&fs.ModeSymlink != 0:
			return b.tree.symlink(target, e.link, owner{uid: o.uid, gid: o.gid}, e.info.ModTime())
		default:
			return b.copyFile(croot, e.rel, e.info, target, o)
		}
	})
}

func (b *builder) copyFile(croot *os.Root, src string, fi fs.FileInfo, target string, o owner) error {
	f, err := croot.Open(rootRel(src))
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer f.Close()
	return b.tree.file(target, f, owner{uid: o.uid, gid: o.gid, mode: o.modeOr(dirfd.UnixMode(fi.Mode())), hasMode: true}, fi.ModTime())
}

// copyOwner reads --chown and --chmod. Names in --chown are looked up in
// the sandbox's /etc/passwd and /etc/group as the steps so far left them;
// a user without a group gets the gid equal to its uid, as Docker does.
func (b *builder) copyOwner(in dockerfile.Instruction) (owner, error) {
	var o owner
	if v, ok := in.Flags["chmod"]; ok {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			return o, stepErr(in, errdefs.InvalidArgument, "--chmod=%s: want an octal mode such as 0755", v)
		}
		o.mode, o.hasMode = uint32(m), true
	}
	v, ok := in.Flags["chown"]
	if !ok {
		return o, nil
	}
	name, group, hasGroup := strings.Cut(v, ":")
	uid, numeric := passwd.ParseID(name)
	if !numeric {
		e, found := passwd.Lookup(b.readImageFile("etc/passwd"), name)
		if name == "" || !found {
			return o, stepErr(in, errdefs.InvalidArgument, "--chown=%s: user %q is not in the image's /etc/passwd", v, name)
		}
		uid = e.UID
	}
	gid := uid
	if hasGroup {
		var ok bool
		if gid, ok = passwd.ParseID(group); !ok {
			if gid, ok = passwd.LookupGroup(b.readImageFile("etc/group"), group); !ok {
				return o, stepErr(in, errdefs.InvalidArgument, "--chown=%s: group %q is not in the image's /etc/group", v, group)
			}
		}
	}
	o.uid, o.gid = int(uid), int(gid)
	return o, nil
}

// Magic numbers of the compressions ADD undoes.
var (
	gzipMagic  = []byte{0x1f, 0x8b}
	bzip2Magic = []byte("BZh")
	xzMagic    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// addArchive extracts src into dest when it is a tar archive, and reports
// whether it was one; anything else is copied as a file by the caller.
func (b *builder) addArchive(ctx context.Context, croot *os.Root, in dockerfile.Instruction, src, dest string) (bool, error) {
	f, err := croot.Open(rootRel(src))
	if err != nil {
		return false, fmt.Errorf("%s: %w", src, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(6)
	var r io.Reader = br
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false, nil
		}
		defer zr.Close()
		r = zr
	case bytes.HasPrefix(magic, bzip2Magic):
		r = bzip2.NewReader(br)
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return false, nil
		}
		defer zr.Close()
		r = zr
	case bytes.HasPrefix(magic, xzMagic):
		return true, stepErr(in, errdefs.NotSupported, "%s: xz archives are not extracted by this builder; use a plain, gzip, bzip2 or zstd tar", src)
	}
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		return false, nil // not a tar: ADD copies it as it is
	}
	if err := b.tree.mkdirAll(dest, owner{mode: 0o755, hasMode: true}); err != nil {
		return true, err
	}
	if err := b.tree.extract(ctx, dest, tr, hdr); err != nil {
		return true, stepErr(in, errdefs.InvalidArgument, "extract %s: %v", src, err)
	}
	return true, nil
}
