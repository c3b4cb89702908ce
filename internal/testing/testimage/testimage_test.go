package testimage

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
)

func TestMirrorParsing(t *testing.T) {
	oneLine := `# comment
deb-src http://deb.debian.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example/debian/ bookworm main contrib
deb http://security.debian.org/debian-security bookworm-security main
`
	if got := mirrorOneLine(oneLine); got != "http://mirror.example/debian" {
		t.Errorf("one-line: %q", got)
	}
	deb822 := `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`
	if got := mirrorDeb822(deb822); got != "http://deb.debian.org/debian" {
		t.Errorf("deb822: %q", got)
	}
	if got := mirrorDeb822("Types: deb\nEnabled: no\nURIs: http://x/debian\nSuites: bookworm\nComponents: main\n"); got != "" {
		t.Errorf("disabled source chosen: %q", got)
	}
	if got := mirrorOneLine("deb http://x/ubuntu jammy main\n"); got != "" {
		t.Errorf("other suite chosen: %q", got)
	}
}

func TestBusyboxRootfs(t *testing.T) {
	b, _ := busyboxTar(t)
	names := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = h
	}
	for _, applet := range []string{"sh", "cat", "head", "sleep", "echo", "ls", "mkdir"} {
		h := names["bin/"+applet]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s: %+v", applet, h)
		}
	}
	if h := names["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v", h)
	}
	if h := names["bin/busybox"]; h == nil || h.Size < 100_000 || h.Mode != 0o755 {
		t.Errorf("bin/busybox: %+v", h)
	}
}
