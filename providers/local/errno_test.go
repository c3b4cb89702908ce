package local_test

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// zeroTar is a tar stream of one file of n zero bytes named name (zeros
// is ports_bench_test.go's), made as it is read.
func zeroTar(name string, n int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: n, Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.CopyN(tw, zeros{}, n)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// TestOneClassPerErrnoOnEveryRoute: an errno is one class whichever route
// met it, the file route (envd) or the tree route (the agent's tree
// upload, hosttar): a full disk is a Permanent ResourceExhausted, which
// no retry loop waits out, and a read-only file system (EROFS, classed
// with EACCES and EPERM: the caller may not) is Unauthenticated. On
// c83d05d the tree route had tables of its own (checked there, this test
// failed): the full disk came back retryable and /sys's refusal
// InvalidArgument, while the file route said Permanent and Unauthenticated.
func TestOneClassPerErrnoOnEveryRoute(t *testing.T) {
	if !local.ProviderCapabilities().Storage {
		t.Skip("no disk limits on this host (mkfs.ext4 and loop devices): nothing fills a sandbox's disk")
	}
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{Resources: sandbox.Resources{StorageMB: attackDiskMB}})
	ctx := testCtx(t)
	over := int64(2*attackDiskMB) << 20

	full := map[string]error{
		"file": sb.WriteFrom(ctx, "/fill", io.LimitReader(zeros{}, over), 0o644),
	}
	sh(t, sb, "rm -f /fill")
	full["tree"] = sb.Upload(ctx, "/up", zeroTar("fill", over))
	for route, err := range full {
		if errdefs.ClassOf(err) != errdefs.ResourceExhausted || !errdefs.IsPermanent(err) || errdefs.Retryable(err) {
			t.Errorf("%s route, full disk: class %v, permanent %v: %v; want a Permanent ResourceExhausted", route, errdefs.ClassOf(err), errdefs.IsPermanent(err), err)
		}
	}

	readOnly := map[string]error{
		"file": sb.WriteFile(ctx, "/sys/berth-x", []byte("x"), 0o644),
		"tree": sb.Upload(ctx, "/sys", bytes.NewReader(testimage.TarBytes(t, testimage.Entry{Name: "berth-x", Body: "x"}))),
	}
	for route, err := range readOnly {
		if errdefs.ClassOf(err) != errdefs.Unauthenticated {
			t.Errorf("%s route, read-only /sys: class %v: %v; want Unauthenticated", route, errdefs.ClassOf(err), err)
		}
	}
}
