package modaltest

import (
	"context"
	"io"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// router serves the task command router: exec and its streams.
type router struct {
	pb.UnimplementedTaskCommandRouterServer
	s *Server
}

// chunkSize bounds one output message.
const chunkSize = 64 << 10

// task finds a task's sandbox after checking the caller's bearer token.
func (r *router) task(ctx context.Context, taskID string) (*sandbox, error) {
	sb, err := r.s.sandboxByTask(taskID)
	if err != nil {
		return nil, err
	}
	if err := checkRouterAuth(ctx, sb); err != nil {
		return nil, err
	}
	return sb, nil
}

// exec finds a task's exec after checking the caller's bearer token.
func (r *router) exec(ctx context.Context, taskID, execID string) (*proc, error) {
	sb, err := r.task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	p, ok := sb.execs[execID]
	sb.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "exec %s not found", short(execID))
	}
	return p, nil
}

func (r *router) TaskExecStart(ctx context.Context, req *pb.TaskExecStartRequest) (*pb.TaskExecStartResponse, error) {
	sb, err := r.task(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	switch {
	case len(req.GetCommandArgs()) == 0:
		return nil, status.Error(codes.InvalidArgument, "command is empty")
	case req.GetExecId() == "":
		return nil, status.Error(codes.InvalidArgument, "exec id is empty")
	case req.HasPtyInfo():
		return nil, status.Error(codes.Unimplemented, "modaltest: PTYs are not implemented")
	case req.GetContainerId() != "":
		return nil, status.Error(codes.Unimplemented, "modaltest: sidecar containers are not implemented")
	}
	spec := execSpec{
		args:           req.GetCommandArgs(),
		dir:            req.GetWorkdir(),
		env:            map[string]string{},
		timeout:        time.Duration(req.GetTimeoutSecs()) * time.Second,
		discardStdout:  req.GetStdoutConfig() == pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_DEVNULL,
		discardStderr:  req.GetStderrConfig() == pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_DEVNULL,
		stderrToStdout: req.GetStderrConfig() == pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_STDOUT,
	}
	for _, src := range req.GetSecretSources() {
		if src.HasSecretId() {
			return nil, status.Error(codes.Unimplemented, "modaltest: named secrets are not implemented")
		}
		for k, v := range src.GetEnv().GetContents() {
			spec.env[k] = v
		}
	}
	for k, v := range req.GetEnv() {
		spec.env[k] = v
	}
	if _, err := sb.start(req.GetExecId(), spec); err != nil {
		return nil, err
	}
	return &pb.TaskExecStartResponse{}, nil
}

// TaskExecStdioRead streams one output from the requested offset until the
// command has ended and everything is sent. With DropStreams set, the
// stream is cut with UNAVAILABLE once it has sent its budget.
func (r *router) TaskExecStdioRead(req *pb.TaskExecStdioReadRequest, stream grpc.ServerStreamingServer[pb.TaskExecStdioReadResponse]) error {
	ctx := stream.Context()
	p, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return err
	}
	out := p.stdout
	if req.GetFileDescriptor() == pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR {
		out = p.stderr
	}
	budget := r.s.faults.dropLimit()
	offset, sent := req.GetOffset(), 0
	for {
		data, eof, err := out.Read(ctx, int(offset), chunkSize)
		if err != nil {
			return status.FromContextError(err).Err()
		}
		if eof {
			return nil
		}
		if err := stream.Send(pb.TaskExecStdioReadResponse_builder{Data: data}.Build()); err != nil {
			return err
		}
		offset += uint64(len(data))
		sent += len(data)
		if budget > 0 && sent >= budget {
			r.s.faults.dropped()
			return status.Error(codes.Unavailable, "stream reset by the worker (injected)")
		}
	}
}

func (r *router) TaskExecWait(ctx context.Context, req *pb.TaskExecWaitRequest) (*pb.TaskExecWaitResponse, error) {
	p, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	code, sig := p.status()
	if sig != 0 {
		return pb.TaskExecWaitResponse_builder{Signal: &sig}.Build(), nil
	}
	return pb.TaskExecWaitResponse_builder{Code: &code}.Build(), nil
}

func (r *router) TaskExecPoll(ctx context.Context, req *pb.TaskExecPollRequest) (*pb.TaskExecPollResponse, error) {
	p, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	default:
		return &pb.TaskExecPollResponse{}, nil
	}
	code, sig := p.status()
	if sig != 0 {
		return pb.TaskExecPollResponse_builder{Signal: &sig}.Build(), nil
	}
	return pb.TaskExecPollResponse_builder{Code: &code}.Build(), nil
}

func (r *router) TaskExecStdinWrite(ctx context.Context, req *pb.TaskExecStdinWriteRequest) (*pb.TaskExecStdinWriteResponse, error) {
	p, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	if err := p.stdin.write(req.GetOffset(), req.GetData(), req.GetEof()); err != nil {
		return nil, err
	}
	return &pb.TaskExecStdinWriteResponse{}, nil
}

// TaskExecStdinWriteStream takes Start, Data..., End. Stdin is closed only
// on End: a stream that breaks before it leaves stdin open for a resume.
func (r *router) TaskExecStdinWriteStream(stream grpc.ClientStreamingServer[pb.TaskExecStdinWriteStreamRequest, pb.TaskExecStdinWriteStreamResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if !first.HasStart() {
		return status.Error(codes.InvalidArgument, "the first message must be start")
	}
	start := first.GetStart()
	p, err := r.exec(stream.Context(), start.GetTaskId(), start.GetExecId())
	if err != nil {
		return err
	}
	offset := start.GetOffset()
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return status.Error(codes.InvalidArgument, "stream ended without end")
		}
		if err != nil {
			return err
		}
		switch {
		case msg.HasData():
			if err := p.stdin.write(offset, msg.GetData(), false); err != nil {
				return err
			}
			offset += uint64(len(msg.GetData()))
		case msg.HasEnd():
			if err := p.stdin.write(offset, nil, true); err != nil {
				return err
			}
			return stream.SendAndClose(&pb.TaskExecStdinWriteStreamResponse{})
		default:
			return status.Error(codes.InvalidArgument, "unexpected message")
		}
	}
}

func (r *router) TaskExecStdinStatus(ctx context.Context, req *pb.TaskExecStdinStatusRequest) (*pb.TaskExecStdinStatusResponse, error) {
	p, err := r.exec(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	n, closed := p.stdin.state()
	return pb.TaskExecStdinStatusResponse_builder{NumBytesWritten: n, Closed: closed}.Build(), nil
}
