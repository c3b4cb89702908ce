package hosttar_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/berth-sh/berth/sandbox/hosttar"
)

// TestStreamCloseStopsTheWriter: a reader that stops early cancels the
// writer and Close returns only once it has returned; a writer's error
// is what the reader sees at the end.
func TestStreamCloseStopsTheWriter(t *testing.T) {
	returned := make(chan error, 1)
	rc := hosttar.Stream(t.Context(), func(ctx context.Context, w io.Writer) error {
		for ctx.Err() == nil {
			if _, err := w.Write([]byte("x")); err != nil {
				break
			}
		}
		returned <- ctx.Err()
		return ctx.Err()
	})
	if _, err := io.ReadFull(rc, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the writer returned with %v, want its ctx cancelled", err)
		}
	default:
		t.Fatal("Close returned before the writer")
	}

	boom := errors.New("boom")
	rc = hosttar.Stream(t.Context(), func(context.Context, io.Writer) error { return boom })
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, boom) {
		t.Errorf("read = %v, want the writer's error", err)
	}
}
