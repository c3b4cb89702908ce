// Package tartest builds tar archives entry by entry for tests of code
// that reads archives: tree uploads, layer unpacking, hostile archives
// (links that escape, names that climb). Tests only.
package tartest

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
)

// Entry is one header of an archive; Data goes with a regular file.
type Entry struct {
	Hdr  tar.Header
	Data string
}

// File is a regular file, mode 0644.
func File(name, data string) Entry {
	return Entry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data}
}

// Dir is a directory, mode 0755.
func Dir(name string) Entry {
	return Entry{Hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

// Symlink is a symbolic link to target.
func Symlink(name, target string) Entry { return Link(tar.TypeSymlink, name, target) }

// Hardlink is a hard link to the archive's entry target.
func Hardlink(name, target string) Entry { return Link(tar.TypeLink, name, target) }

// Link is a link of type typ (tar.TypeSymlink or tar.TypeLink).
func Link(typ byte, name, target string) Entry {
	return Entry{Hdr: tar.Header{Name: name, Typeflag: typ, Linkname: target}}
}

// Build writes the entries, in order, as an uncompressed archive.
func Build(t testing.TB, es ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := e.Hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		// Unchecked: a hostile entry may say a size its data does not have.
		_, _ = io.WriteString(tw, e.Data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
