package hosttar

import (
	"context"
	"io"
)

// Stream runs write on a goroutine of its own into a pipe and returns the
// pipe's reading end: an archive read as it is written, ended by write's
// error. Close cancels write's ctx and waits for it, so no goroutine
// outlives the stream.
func Stream(ctx context.Context, write func(ctx context.Context, w io.Writer) error) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	s := &stream{pr: pr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		pw.CloseWithError(write(ctx, pw))
	}()
	return s
}

type stream struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *stream) Read(b []byte) (int, error) { return s.pr.Read(b) }

func (s *stream) Close() error {
	s.cancel()
	err := s.pr.Close()
	<-s.done
	return err
}
