package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A process in the sandbox swaps a directory of its upper layer for a
// symlink to a host directory, over and over, while the host commits the
// layer. Whatever each commit writes (or refuses), nothing of the host's
// tree lands in the layer: not a symlink target, a mode or a byte of the
// host's files. The host directory holds the same names as the sandbox's,
// as links to a marker, so that a walk resolving "d/x000" by path through
// the swapped-in link reads the host's entry.
//
// Checked against main at 87dd401 (layerWriter.entry by host path:
// unix.Lstat, os.Readlink and unix.Llistxattr of dir+"/d/x"): the host's
// link targets landed in the layer within the first commits; passes after.
func TestAttackCommitSwapsDirForHostLink(t *testing.T) {
	const names = 200
	mark := fmt.Sprintf("HOST-LEAK-%d", os.Getpid())
	host := t.TempDir() // the host's directory the sandbox points at
	upper := t.TempDir()
	d := filepath.Join(upper, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range names {
		n := fmt.Sprintf("x%03d", i)
		if err := os.WriteFile(filepath.Join(d, n), []byte("sandbox"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/"+mark, filepath.Join(host, n)); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(upper, "link")
	if err := os.Symlink(host, link); err != nil {
		t.Fatal(err)
	}

	// The sandbox's process: exchange d and the link atomically, so that
	// d is always there, a directory or a link to the host's.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	ok := 0
	for range 100 {
		var buf bytes.Buffer
		if err := writeLayer(context.Background(), &buf, upper, nil); err != nil {
			continue // a refusal: a name changed under the walk
		}
		ok++
		tr := tar.NewReader(&buf)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(tr)
			leak := strings.Contains(hdr.Linkname, mark) || bytes.Contains(body, []byte(mark))
			for k, v := range hdr.PAXRecords {
				leak = leak || strings.Contains(k+v, mark)
			}
			if leak {
				t.Fatalf("the host's entry landed in the layer: %s -> %q", hdr.Name, hdr.Linkname)
			}
			if strings.HasPrefix(hdr.Name, "d/x") || strings.HasPrefix(hdr.Name, "link/x") {
				if hdr.Typeflag != tar.TypeReg || string(body) != "sandbox" {
					t.Fatalf("%s in the layer is not the sandbox's file: type %c %q", hdr.Name, hdr.Typeflag, body)
				}
			}
		}
	}
	if ok == 0 {
		t.Fatal("no commit completed: the test shows nothing about what a commit writes")
	}
	t.Logf("%d of 100 commits completed under the swaps", ok)
}
