package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// smallTree writes a tree shaped like a Harbor task's solution/ or tests/
// directory: a script, a data file, a subdirectory.
func smallTree(b testing.TB) string {
	dir := b.TempDir()
	for name, body := range map[string]string{
		"solve.sh":     "#!/bin/sh\necho 42 > /tmp/answer\n",
		"data.txt":     "some data\n",
		"sub/conf.ini": "[a]\nb = c\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkTreeUpload times UploadDir of a small tree into a running
// sandbox, as a trial uploads solution/ and tests/.
func BenchmarkTreeUpload(b *testing.B) {
	p := benchProvider(b)
	ctx := context.Background()
	sb := benchSandbox(b, p)
	src := smallTree(b)
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := sb.UploadDir(ctx, src, "/tmp/up"); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportP50(b, ds)
}

// BenchmarkTreeDownload times DownloadDir of a small tree out of a running
// sandbox, as a trial downloads /logs/agent and /logs/verifier.
func BenchmarkTreeDownload(b *testing.B) {
	p := benchProvider(b)
	ctx := context.Background()
	sb := benchSandbox(b, p)
	if err := sb.UploadDir(ctx, smallTree(b), "/logs/agent"); err != nil {
		b.Fatal(err)
	}
	dst := b.TempDir()
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		// Extraction replaces the files of the previous round.
		if err := sb.DownloadDir(ctx, "/logs/agent", dst); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportP50(b, ds)
}
