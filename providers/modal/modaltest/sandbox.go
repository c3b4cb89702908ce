package modaltest

import (
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// sandbox is one V2 sandbox: the engine's, with Modal's names for it and
// the commands run in it.
type sandbox struct {
	s         *Server
	eb        *fakeengine.Sandbox // its tree, processes, tags and deadline
	id        string
	taskID    string
	appID     string
	env       string // the app's environment
	imageID   string
	created   float64
	def       *pb.Sandbox
	routerJWT string

	mu      sync.Mutex
	execs   map[string]*proc
	tunnels []*tunnel // set before the sandbox is visible, closed by finish
}

func (s *Server) newSandbox(a *app, im *image, def *pb.Sandbox, tags, vars map[string]string) (*sandbox, error) {
	sb := &sandbox{
		s: s, id: "sb-v2-" + randomID(20), taskID: "ta-" + randomID(22), appID: a.id, env: a.env,
		imageID: im.id, def: proto.Clone(def).(*pb.Sandbox), execs: map[string]*proc{},
	}
	// The image is the host (or busybox, in chroot mode), with a tree where
	// /tmp and the workdir exist; a snapshot's image brings the tree it
	// saved.
	eb, err := s.eng.Create(fakeengine.Spec{
		ID: sb.id, Labels: tags, Env: vars, WorkDir: def.GetWorkdir(), Value: sb,
		Layout: &busyroot.Root{Busybox: s.opts.Busybox}, Seed: im.tree,
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "making the sandbox's tree: %v", err)
	}
	sb.eb = eb
	if err := sb.openTunnels(); err != nil {
		sb.finish(fakeengine.Deleted)
		return nil, err
	}
	// Armed once sb is whole: the timeout's finish reads it.
	eb.SetDeadline(eb.Created.Add(time.Duration(def.GetTimeoutSecs()) * time.Second))
	exp := time.Now().Add(time.Duration(def.GetTimeoutSecs()+3600) * time.Second)
	sb.routerJWT = jwt(map[string]any{"exp": exp.Unix(), "task_id": sb.taskID})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		sb.finish(fakeengine.Closed)
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	sb.created = s.createdAtLocked()
	s.sandboxes[sb.id] = sb
	s.tasks[sb.taskID] = sb
	return sb, nil
}

// finish ends the sandbox once: its commands are killed and its tree goes;
// the record stays so that wait and task lookups report how it ended.
func (sb *sandbox) finish(why fakeengine.Reason) {
	_ = sb.eb.End(why)
	sb.closeTunnels()
}

// results are how a sandbox ended, as Modal reports it.
var results = map[fakeengine.Reason]*pb.GenericResult{
	fakeengine.Expired: pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_TIMEOUT, Exception: "Sandbox timed out"}.Build(),
	fakeengine.Deleted: pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_TERMINATED, Exception: "Sandbox terminated"}.Build(),
	fakeengine.Closed:  pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_TERMINATED, Exception: "server closed"}.Build(),
}

// resultOrNil is how the sandbox ended; nil while it runs.
func (sb *sandbox) resultOrNil() *pb.GenericResult {
	why, _ := sb.eb.Ended()
	return results[why]
}

func (sb *sandbox) tagList() []*pb.SandboxTag {
	tags := sb.eb.Labels()
	out := make([]*pb.SandboxTag, 0, len(tags))
	for k, v := range tags {
		out = append(out, pb.SandboxTag_builder{TagName: k, TagValue: v}.Build())
	}
	return out
}

// SandboxState is what the server knows of a sandbox, for assertions.
type SandboxState struct {
	ID, AppID, ImageID string
	// Definition is the definition the client sent.
	Definition *pb.Sandbox
	// Env is the environment the client sent for every command.
	Env  map[string]string
	Tags map[string]string
	// Result is nil while the sandbox runs.
	Result *pb.GenericResult
	// Dir is the host directory that is the sandbox's "/".
	Dir string
}

// Sandbox returns the state of the sandbox with this ID.
func (s *Server) Sandbox(id string) (SandboxState, bool) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	s.mu.Unlock()
	if !ok {
		return SandboxState{}, false
	}
	return SandboxState{
		ID:         sb.id,
		AppID:      sb.appID,
		ImageID:    sb.imageID,
		Definition: proto.Clone(sb.def).(*pb.Sandbox),
		Env:        sb.eb.Env(),
		Tags:       sb.eb.Labels(),
		Result:     sb.resultOrNil(),
		Dir:        sb.eb.Root(),
	}, true
}

// Running returns the IDs of the sandboxes that have not ended.
func (s *Server) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, sb := range s.sandboxes {
		if sb.resultOrNil() == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// Image is an image the server was asked for, by its reference.
type Image struct {
	ID, Ref string
	// Dockerfile is the Dockerfile commands the client sent.
	Dockerfile []string
}

// Images returns the images the server was asked to build.
func (s *Server) Images() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Image
	for _, im := range s.imagesByID {
		out = append(out, Image{ID: im.id, Ref: im.ref, Dockerfile: append([]string(nil), im.lines...)})
	}
	return out
}
