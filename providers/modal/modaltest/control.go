package modaltest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// control serves the control plane calls the SDK makes for apps, images
// and sandboxes. Calls it does not implement answer UNIMPLEMENTED.
type control struct {
	pb.UnimplementedModalClientServer
	s *Server
}

// builderVersion is what every environment reports as its image builder.
const builderVersion = "2025.06"

type app struct {
	id, name, env string
}

func (c *control) AuthTokenGet(context.Context, *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	return pb.AuthTokenGetResponse_builder{Token: c.s.issueAuthToken()}.Build(), nil
}

// environment resolves a name ("" is the default) to a known environment.
func (s *Server) environment(name string) (string, error) {
	if name == "" {
		return s.opts.Environments[0], nil
	}
	if !slices.Contains(s.opts.Environments, name) {
		return "", status.Errorf(codes.NotFound, "Environment %s not found", short(name))
	}
	return name, nil
}

func (c *control) EnvironmentGetOrCreate(_ context.Context, req *pb.EnvironmentGetOrCreateRequest) (*pb.EnvironmentGetOrCreateResponse, error) {
	name, err := c.s.environment(req.GetDeploymentName())
	if err != nil {
		return nil, err
	}
	return pb.EnvironmentGetOrCreateResponse_builder{
		EnvironmentId: "en-" + name,
		Metadata: pb.EnvironmentMetadata_builder{
			Name:     name,
			Settings: pb.EnvironmentSettings_builder{ImageBuilderVersion: builderVersion}.Build(),
		}.Build(),
	}.Build(), nil
}

func (c *control) AppGetOrCreate(_ context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	env, err := c.s.environment(req.GetEnvironmentName())
	if err != nil {
		return nil, err
	}
	if req.GetAppName() == "" {
		return nil, status.Error(codes.InvalidArgument, "app name is empty")
	}
	key := env + "/" + req.GetAppName()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	a, ok := c.s.apps[key]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "App %s not found", short(req.GetAppName()))
		}
		a = &app{id: "ap-" + randomID(22), name: req.GetAppName(), env: env}
		c.s.apps[key] = a
	}
	return pb.AppGetOrCreateResponse_builder{AppId: a.id}.Build(), nil
}

func (s *Server) appByID(id string) (*app, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		if a.id == id {
			return a, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "App %s not found", short(id))
}

// image is one Dockerfile the server was asked to build.
type image struct {
	id, ref string
	lines   []string
	result  *pb.GenericResult // nil until the build has run
	log     []string
	tree    string // a file system snapshot's copy of "/"; "" for a build
}

func (c *control) ImageGetOrCreate(_ context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	if _, err := c.s.appByID(req.GetAppId()); err != nil {
		return nil, err
	}
	lines := req.GetImage().GetDockerfileCommands()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "FROM ") {
		return nil, status.Error(codes.InvalidArgument, "an image needs a FROM line first")
	}
	ref := strings.TrimSpace(strings.TrimPrefix(lines[0], "FROM "))
	key := strings.Join(lines, "\n")
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	im, ok := c.s.images[key]
	if ok && im.result != nil && im.result.GetStatus() != pb.GenericResult_GENERIC_STATUS_SUCCESS {
		ok = false // a failed build is tried again
	}
	if !ok {
		im = &image{id: "im-" + randomID(22), ref: ref, lines: lines}
		c.s.images[key] = im
		c.s.imagesByID[im.id] = im
	}
	// A new image has no result yet: the client joins its build stream.
	return pb.ImageGetOrCreateResponse_builder{ImageId: im.id, Result: im.result}.Build(), nil
}

// ImageJoinStreaming "builds" the image: it streams log lines, then the
// result. Nothing is pulled; sandboxes run on the host.
func (c *control) ImageJoinStreaming(req *pb.ImageJoinStreamingRequest, stream grpc.ServerStreamingServer[pb.ImageJoinStreamingResponse]) error {
	c.s.mu.Lock()
	im, ok := c.s.imagesByID[req.GetImageId()]
	c.s.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "Image %s not found", short(req.GetImageId()))
	}
	c.s.mu.Lock()
	if im.result == nil {
		log := []string{"Building image " + im.id, "", "=> Step 0: FROM " + im.ref}
		for i, l := range im.lines[1:] {
			log = append(log, fmt.Sprintf("=> Step %d: %s", i+1, l))
		}
		res := pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build()
		if f, fail := c.s.faults.buildFailure(im.ref); fail {
			log = append(log, f.Log...)
			res = pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_FAILURE, Exception: f.Exception}.Build()
		} else {
			log = append(log, "Saving image...", "Image saved, took 0.01s", "", "Built image "+im.id)
		}
		im.log, im.result = log, res
	}
	log, res := im.log, im.result
	c.s.mu.Unlock()
	for i, line := range log {
		msg := pb.ImageJoinStreamingResponse_builder{
			EntryId: fmt.Sprintf("%d-0", i+1),
			TaskLogs: []*pb.TaskLogs{pb.TaskLogs_builder{
				Data:           line + "\n",
				FileDescriptor: pb.FileDescriptor_FILE_DESCRIPTOR_STDOUT,
				Timestamp:      float64(time.Now().UnixNano()) / 1e9,
			}.Build()},
		}.Build()
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return stream.Send(pb.ImageJoinStreamingResponse_builder{Result: res, Eof: true}.Build())
}

// maxTimeoutSecs is Modal's longest sandbox lifetime, 24 hours.
const maxTimeoutSecs = 24 * 60 * 60

func (c *control) SandboxCreateV2(ctx context.Context, req *pb.SandboxCreateV2Request) (*pb.SandboxCreateV2Response, error) {
	a, err := c.s.appByID(req.GetAppId())
	if err != nil {
		return nil, err
	}
	def := req.GetDefinition()
	c.s.mu.Lock()
	im, ok := c.s.imagesByID[def.GetImageId()]
	built := ok && im.result.GetStatus() == pb.GenericResult_GENERIC_STATUS_SUCCESS
	c.s.mu.Unlock()
	switch {
	case !built:
		return nil, status.Errorf(codes.FailedPrecondition, "Image %s is not built", short(def.GetImageId()))
	case def.GetTimeoutSecs() == 0 || def.GetTimeoutSecs() > maxTimeoutSecs:
		return nil, status.Errorf(codes.InvalidArgument, "timeout must be between 1 second and 24 hours, got %ds", def.GetTimeoutSecs())
	case len(def.GetEntrypointArgs()) > 0:
		return nil, status.Error(codes.Unimplemented, "modaltest: sandboxes with an entrypoint command are not implemented")
	case def.GetWorkdir() != "" && !strings.HasPrefix(def.GetWorkdir(), "/"):
		return nil, status.Error(codes.InvalidArgument, "workdir must be an absolute path")
	}
	if err := checkNetworkAccess(def.GetNetworkAccess()); err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		tags[t.GetTagName()] = t.GetTagValue()
	}
	vars := map[string]string{}
	for _, src := range req.GetSecretSources() {
		if src.HasSecretId() {
			return nil, status.Error(codes.Unimplemented, "modaltest: named secrets are not implemented")
		}
		for k, v := range src.GetEnv().GetContents() {
			vars[k] = v
		}
	}
	sb, err := c.s.newSandbox(a, im, def, tags, vars)
	if err != nil {
		return nil, err
	}
	return pb.SandboxCreateV2Response_builder{
		SandboxId: sb.id,
		TaskId:    sb.taskID,
		Tunnels:   sb.tunnelData(true),
		CommandRouterAccess: pb.CommandRouterAccess_builder{
			Jwt: sb.routerJWT,
			Url: c.s.routerURL(),
		}.Build(),
	}.Build(), nil
}

func (c *control) SandboxGetTaskIdV2(_ context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	sb, err := c.s.sandboxByID(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if res := sb.resultOrNil(); res != nil {
		return pb.SandboxGetTaskIdResponse_builder{TaskResult: res}.Build(), nil
	}
	return pb.SandboxGetTaskIdResponse_builder{TaskId: &sb.taskID}.Build(), nil
}

func (c *control) SandboxWaitV2(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	sb, err := c.s.sandboxByID(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	wait := time.Duration(float64(req.GetTimeout()) * float64(time.Second))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-sb.eb.Done():
	case <-t.C:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return pb.SandboxWaitResponse_builder{Result: sb.resultOrNil()}.Build(), nil
}

func (c *control) SandboxTerminateV2(_ context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	sb, err := c.s.sandboxByID(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if res := sb.resultOrNil(); res != nil {
		return pb.SandboxTerminateResponse_builder{ExistingResult: res}.Build(), nil
	}
	sb.finish(fakeengine.Deleted)
	return &pb.SandboxTerminateResponse{}, nil
}

// listPage is how many sandboxes one SandboxListV2 answer holds.
const listPage = 20

func (c *control) SandboxListV2(_ context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	want := map[string]string{}
	for _, t := range req.GetTags() {
		want[t.GetTagName()] = t.GetTagValue()
	}
	env := ""
	if req.GetAppId() == "" {
		var err error
		if env, err = c.s.environment(req.GetEnvironmentName()); err != nil {
			return nil, err
		}
	}
	c.s.mu.Lock()
	var match []*sandbox
	for _, sb := range c.s.sandboxes {
		switch {
		case req.GetAppId() != "" && sb.appID != req.GetAppId(),
			env != "" && sb.env != env,
			req.GetBeforeTimestamp() != 0 && sb.created >= req.GetBeforeTimestamp():
			continue
		}
		match = append(match, sb)
	}
	c.s.mu.Unlock()
	slices.SortFunc(match, func(a, b *sandbox) int {
		switch {
		case a.created > b.created:
			return -1
		case a.created < b.created:
			return 1
		}
		return 0
	})
	var out []*pb.SandboxInfo
	for _, sb := range match {
		if len(out) == listPage {
			break
		}
		res := sb.resultOrNil()
		if (res != nil && !req.GetIncludeFinished()) || !sb.eb.HasLabels(want) {
			continue
		}
		out = append(out, pb.SandboxInfo_builder{
			Id:          sb.id,
			AppId:       sb.appID,
			CreatedAt:   sb.created,
			ImageId:     sb.imageID,
			TimeoutSecs: sb.def.GetTimeoutSecs(),
			Tags:        sb.tagList(),
			TaskInfo:    pb.TaskInfo_builder{Id: sb.taskID, SandboxId: sb.id, StartedAt: sb.created, Result: res}.Build(),
		}.Build())
	}
	return pb.SandboxListResponse_builder{Sandboxes: out}.Build(), nil
}

func (c *control) SandboxTagsGetV2(_ context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	sb, err := c.s.sandboxByID(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	return pb.SandboxTagsGetResponse_builder{Tags: sb.tagList()}.Build(), nil
}

func (c *control) SandboxTagsSetV2(_ context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	sb, err := c.s.sandboxByID(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		tags[t.GetTagName()] = t.GetTagValue()
	}
	sb.eb.SetLabels(tags)
	return &emptypb.Empty{}, nil
}

func (c *control) SandboxGetCommandRouterAccess(_ context.Context, req *pb.SandboxGetCommandRouterAccessRequest) (*pb.SandboxGetCommandRouterAccessResponse, error) {
	var sb *sandbox
	var err error
	if req.HasTaskId() {
		sb, err = c.s.sandboxByTask(req.GetTaskId())
	} else {
		sb, err = c.s.sandboxByID(req.GetSandboxId())
	}
	if err != nil {
		return nil, err
	}
	if sb.resultOrNil() != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "Sandbox %s has already finished", sb.id)
	}
	return pb.SandboxGetCommandRouterAccessResponse_builder{Jwt: sb.routerJWT, Url: c.s.routerURL()}.Build(), nil
}
