package transcript

import (
	"context"
	"errors"
	"io"
	"maps"
	"path"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// UnaryInterceptor records every unary RPC: its name, its status code and
// the fields set in its request and answer.
func (t *Transcript) UnaryInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		e := Entry{Method: path.Base(method), Status: status.Code(err).String()}
		if m, ok := req.(proto.Message); ok {
			e.Request = ProtoFields(m)
		}
		if m, ok := reply.(proto.Message); ok && err == nil {
			e.Response = ProtoFields(m)
		}
		t.Add(e)
		return err
	}
}

// StreamInterceptor records every stream RPC once it ends: its name, its
// status, and the union of the fields set in the messages each way.
func (t *Transcript) StreamInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			t.Add(Entry{Method: path.Base(method), Status: status.Code(err).String()})
			return nil, err
		}
		return &stream{ClientStream: cs, t: t, method: path.Base(method), sent: map[string]bool{}, got: map[string]bool{}}, nil
	}
}

type stream struct {
	grpc.ClientStream
	t         *Transcript
	method    string
	sent, got map[string]bool
	done      bool
}

func (s *stream) SendMsg(m any) error {
	if pm, ok := m.(proto.Message); ok {
		for _, f := range ProtoFields(pm) {
			s.sent[f] = true
		}
	}
	return s.ClientStream.SendMsg(m)
}

func (s *stream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		if pm, ok := m.(proto.Message); ok {
			for _, f := range ProtoFields(pm) {
				s.got[f] = true
			}
		}
		return nil
	}
	if !s.done {
		s.done = true
		st := "OK"
		if !errors.Is(err, io.EOF) {
			st = status.Code(err).String()
		}
		s.t.Add(Entry{Method: s.method, Status: st,
			Request: slices.Sorted(maps.Keys(s.sent)), Response: slices.Sorted(maps.Keys(s.got))})
	}
	return err
}

// ProtoFields returns the names of the fields set in m, nested ones as
// dotted paths, repeated messages as "name[]"; a map field is its name
// alone (its keys are data).
func ProtoFields(m proto.Message) []string {
	set := map[string]bool{}
	protoWalk(m.ProtoReflect(), "", set)
	return slices.Sorted(maps.Keys(set))
}

func protoWalk(m protoreflect.Message, prefix string, set map[string]bool) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := string(fd.Name())
		if prefix != "" {
			p = prefix + "." + p
		}
		set[p] = true
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				protoWalk(l.Get(i).Message(), p+"[]", set)
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList():
			protoWalk(v.Message(), p, set)
		}
		return true
	})
}
