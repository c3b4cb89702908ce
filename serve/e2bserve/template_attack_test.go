package e2bserve

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/serve/internal/core"
)

// TestAttackTemplateUploads: a client that controls the archive, the
// files hash in the path, the upload URL and the COPY step cannot write
// outside the build context: archives with ".." names, absolute names and
// links that lead out are refused at upload (400) and, planted in the
// store past that check, again when the build unpacks them; a hash that
// is a path is refused; a URL signed for one upload does not take
// another; COPY sources outside the context are refused; one key's
// uploads are neither visible to nor usable by another.
func TestAttackTemplateUploads(t *testing.T) {
	e := newLocalEnv(t, nil)
	tid, _ := e.requestTemplate(testKey, "attack-"+core.NewID()[:8])
	victim := t.TempDir() // what an escape would write into
	escape := filepath.Join(victim, "pwned")
	rel, err := filepath.Rel(filepath.Join(e.api.tpl.dir, "uploads"), escape)
	if err != nil {
		t.Fatal(err)
	}
	hostile := map[string][]byte{
		"dot-dot name":      tartest.Build(t, tartest.File(rel, "x")),
		"absolute name":     tartest.Build(t, tartest.File(escape, "x")),
		"absolute symlink":  tartest.Build(t, tartest.Symlink("out", victim), tartest.File("out/pwned", "x")),
		"climbing symlink":  tartest.Build(t, tartest.Symlink("out", strings.Repeat("../", 12)+strings.TrimPrefix(victim, "/")), tartest.File("out/pwned", "x")),
		"link then through": tartest.Build(t, tartest.Dir("d"), tartest.Symlink("d/up", ".."), tartest.Symlink("d/up2", "up/.."), tartest.File("d/up2/pwned", "x")),
		"hard link out":     tartest.Build(t, tartest.Hardlink("passwd", "/etc/passwd")),
	}
	for name, archive := range hostile {
		hash, r := e.upload(testKey, tid, gzipped(t, archive))
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "cannot be unpacked here") {
			t.Errorf("%s: upload answered %d %s; want 400", name, r.Status, r.Body)
		}
		if present, _, _ := e.fileLink(testKey, tid, hash); present {
			t.Errorf("%s: the refused archive is kept", name)
		}
	}
	assertNoEscape := func(when string) {
		t.Helper()
		if _, err := os.Lstat(escape); err == nil {
			t.Fatalf("%s: %s was written outside the build context", when, escape)
		}
		if ents, _ := os.ReadDir(victim); len(ents) != 0 {
			t.Fatalf("%s: the victim directory holds %v", when, ents)
		}
	}
	assertNoEscape("uploads")

	// The files hash is a file name on the server: a path is refused.
	for _, h := range []string{"..%2F..%2Fpwned", "%2Fetc%2Fpasswd", strings.Repeat("A", 64)} {
		if r := e.Call("GET", "/templates/"+tid+"/files/"+h, testKey, nil, nil); r.Status != http.StatusBadRequest {
			t.Errorf("file link for hash %q: %d %s", h, r.Status, r.Body)
		}
		if r := e.put(e.URL+"/templates/"+tid+"/files/"+h+"?expires=9999999999&signature=00", []byte("x")); r.Status != http.StatusForbidden {
			t.Errorf("PUT for hash %q: %d %s", h, r.Status, r.Body)
		}
	}

	// Upload URLs: signed for one template, hash and time.
	good := gzipped(t, tartest.Build(t, tartest.File("a.txt", "a")))
	hash := hashOf(good)
	_, u, _ := e.fileLink(testKey, tid, hash)
	other := strings.Repeat("e", 64)
	exp := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	for name, bad := range map[string]string{
		"no signature":       strings.Split(u, "?")[0],
		"tampered signature": withQuery(t, u, "signature", strings.Repeat("0", 64)),
		"later expiry":       withQuery(t, u, "expires", "99999999999"),
		"another hash":       strings.Replace(u, hash, other, 1),
		"expired":            withQuery(t, withQuery(t, u, "expires", exp), "signature", e.api.tpl.sign(tid, hash, exp)),
	} {
		if r := e.put(bad, good); r.Status != http.StatusForbidden {
			t.Errorf("%s: PUT answered %d %s", name, r.Status, r.Body)
		}
	}
	if r := e.put(u, good); r.Status != http.StatusOK {
		t.Fatalf("the signed upload: %d %s", r.Status, r.Body)
	}

	// COPY sources outside the context are refused before anything runs.
	ctid, cbid := e.requestTemplate(testKey, "attack-copy-"+core.NewID()[:8])
	for _, src := range []string{"../../../etc", "/etc/passwd", "a/../../b"} {
		r := e.startTemplateBuild(testKey, ctid, cbid, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{src, "/x"}, FilesHash: hash}}})
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "build context") {
			t.Errorf("COPY %q: %d %s", src, r.Status, r.Body)
		}
	}

	// Another key: the upload is not present for it, and a COPY naming
	// its hash is refused.
	otid, obid := e.requestTemplate(otherKey, "attack-other-"+core.NewID()[:8])
	if present, _, r := e.fileLink(otherKey, otid, hash); r.Status != http.StatusCreated || present {
		t.Fatalf("another key sees the upload: %d present=%v", r.Status, present)
	}
	r := e.startTemplateBuild(otherKey, otid, obid, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{"a.txt", "/a.txt"}, FilesHash: hash}}})
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "were not uploaded") {
		t.Fatalf("COPY of another key's upload: %d %s", r.Status, r.Body)
	}

	// Past the upload check: a hostile archive planted in the store is
	// refused again when a build unpacks it into its context.
	planted := hashOf([]byte("planted"))
	if err := os.WriteFile(e.api.tpl.uploadPath(apikeys.ID(testKey), planted), hostile["dot-dot name"], 0o600); err != nil {
		t.Fatal(err)
	}
	e.api.tpl.mu.Lock()
	e.api.tpl.key(apikeys.ID(testKey)).uploads[planted] = 1
	e.api.tpl.mu.Unlock()
	ptid, pbid := e.requestTemplate(testKey, "attack-planted-"+core.NewID()[:8])
	if r := e.startTemplateBuild(testKey, ptid, pbid, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{{Type: "COPY", Args: []string{".", "/x"}, FilesHash: planted}}}); r.Status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	bi := e.waitBuild(testKey, ptid, pbid)
	if bi.Status != statusError || !strings.Contains(bi.Reason.Message, "cannot be unpacked") {
		t.Fatalf("the planted archive built: %s %+v", bi.Status, bi.Reason)
	}
	assertNoEscape("build")
}

// TestAttackTemplateUploadCollisions: names that collide, in one archive
// or across keys, neither write through what was there before nor reach
// past the upload's own directory. A name given twice holds the last
// entry, as tar has it; an entry replacing a symlink or a hard link
// replaces the link and leaves its target alone; an entry below a file, or
// a file over a directory, is refused; a link to the build context around
// the upload (its Dockerfile) is refused although it stays in the
// context; another key's archive under the same hash is its own.
func TestAttackTemplateUploadCollisions(t *testing.T) {
	e := newLocalEnv(t, nil)
	tid, _ := e.requestTemplate(testKey, "collide-"+core.NewID()[:8])
	unpacked := func(hash string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "s1")
		if err := e.api.tpl.unpackUpload(t.Context(), apikeys.ID(testKey), hash, dir); err != nil {
			t.Fatalf("unpacking %s: %v", hash, err)
		}
		return dir
	}
	read := func(dir, name string) string {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %v (mode %v), want a regular file", name, err, fi)
		}
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}

	for _, c := range []struct {
		name    string
		archive []byte
		want    map[string]string // name -> content, after unpacking
	}{
		{"a name twice", tartest.Build(t, tartest.File("a", "one"), tartest.File("a", "two")), map[string]string{"a": "two"}},
		{"a file over a symlink", tartest.Build(t, tartest.File("t", "target"), tartest.Symlink("l", "t"), tartest.File("l", "evil")),
			map[string]string{"t": "target", "l": "evil"}},
		{"a file over a hard link's target", tartest.Build(t, tartest.File("a", "one"), tartest.Hardlink("h", "a"), tartest.File("a", "two")),
			map[string]string{"a": "two", "h": "one"}},
		{"a symlink over a file", tartest.Build(t, tartest.File("t", "target"), tartest.File("l", "old"), tartest.Symlink("l", "t"), tartest.File("t", "new")),
			map[string]string{"t": "new"}},
	} {
		hash, r := e.upload(testKey, tid, gzipped(t, c.archive))
		if r.Status != http.StatusOK {
			t.Fatalf("%s: upload answered %d %s", c.name, r.Status, r.Body)
		}
		dir := unpacked(hash)
		for name, want := range c.want {
			if got := read(dir, name); got != want {
				t.Errorf("%s: %s holds %q, want %q", c.name, name, got, want)
			}
		}
	}

	for name, archive := range map[string][]byte{
		"an entry below a file":       tartest.Build(t, tartest.File("d", "x"), tartest.File("d/y", "y")),
		"a file over a directory":     tartest.Build(t, tartest.Dir("d"), tartest.File("d/y", "y"), tartest.File("d", "x")),
		"a link to the Dockerfile":    tartest.Build(t, tartest.Symlink("df", "../Dockerfile")),
		"a link to a sibling upload":  tartest.Build(t, tartest.Symlink("other", "../s2/secret")),
		"a file through a name taken": tartest.Build(t, tartest.Symlink("d", "."), tartest.File("d/x", "x")),
	} {
		hash, r := e.upload(testKey, tid, gzipped(t, archive))
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "cannot be unpacked here") {
			t.Errorf("%s: upload answered %d %s; want 400", name, r.Status, r.Body)
		}
		if e.api.tpl.present(apikeys.ID(testKey), hash) {
			t.Errorf("%s: the refused archive is kept", name)
		}
	}

	// Another key PUTs other files under the hash of this key's archive:
	// each key builds from its own.
	mine := gzipped(t, tartest.Build(t, tartest.File("who", "mine")))
	hash, r := e.upload(testKey, tid, mine)
	if r.Status != http.StatusOK {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	otid, _ := e.requestTemplate(otherKey, "collide-other-"+core.NewID()[:8])
	present, u, _ := e.fileLink(otherKey, otid, hash)
	if present {
		t.Fatal("another key's hash is present for this one")
	}
	if r := e.put(u, gzipped(t, tartest.Build(t, tartest.File("who", "theirs")))); r.Status != http.StatusOK {
		t.Fatalf("the other key's upload under the same hash: %d %s", r.Status, r.Body)
	}
	if got := read(unpacked(hash), "who"); got != "mine" {
		t.Fatalf("this key's archive of %s unpacks %q", hash[:12], got)
	}
}
