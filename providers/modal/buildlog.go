package modal

import (
	"context"
	"strings"
	"sync"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
)

// The SDK follows an image build on the ImageJoinStreaming stream and drops
// its log lines, reporting a failure with the server's exception alone. The
// log's tail is what says why a build failed, so a stream interceptor (the
// SDK's hook for observability) copies the lines into the buildLog that the
// build's context carries.

const (
	joinStreamingMethod = "/modal.client.ModalClient/ImageJoinStreaming"
	buildLogLines       = 20      // lines of the tail in an error
	buildLogBytes       = 8 << 10 // bytes kept, at most
)

type buildLogKey struct{}

// buildLog keeps the last lines of a build's log.
type buildLog struct {
	mu   sync.Mutex
	text string
}

func withBuildLog(ctx context.Context, l *buildLog) context.Context {
	return context.WithValue(ctx, buildLogKey{}, l)
}

func (l *buildLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text += s
	if len(l.text) > buildLogBytes {
		l.text = l.text[len(l.text)-buildLogBytes:]
	}
}

// tail is the log's last lines, as a suffix for an error message, or "".
func (l *buildLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.text, "\n"), "\n")
	if len(lines) > buildLogLines {
		lines = lines[len(lines)-buildLogLines:]
	}
	t := strings.Join(lines, "\n")
	if strings.TrimSpace(t) == "" {
		return ""
	}
	return "\nbuild log (last lines):\n" + t
}

// captureBuildLog is a gRPC stream interceptor that copies build log lines
// into the context's buildLog.
func captureBuildLog(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != joinStreamingMethod {
		return cs, err
	}
	l, ok := ctx.Value(buildLogKey{}).(*buildLog)
	if !ok {
		return cs, nil
	}
	return &logStream{ClientStream: cs, log: l}, nil
}

type logStream struct {
	grpc.ClientStream
	log *buildLog
}

func (s *logStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if resp, ok := m.(*pb.ImageJoinStreamingResponse); ok && err == nil {
		for _, tl := range resp.GetTaskLogs() {
			s.log.add(tl.GetData())
		}
	}
	return err
}
