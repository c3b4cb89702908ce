package modaltest

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/berth-sh/berth/internal/testing/busyroot"
)

// sandbox is one V2 sandbox: a directory tree and the commands run in it.
type sandbox struct {
	s         *Server
	id        string
	taskID    string
	appID     string
	env       string // the app's environment
	imageID   string
	created   float64
	def       *pb.Sandbox
	vars      map[string]string // environment of every command
	dir       string            // <Dir>/<id>; root/ inside is the sandbox's /
	root      string
	routerJWT string
	done      chan struct{} // closed when the sandbox has ended

	mu      sync.Mutex
	timer   *time.Timer
	tags    map[string]string
	result  *pb.GenericResult
	execs   map[string]*proc
	tunnels []*tunnel // set before the sandbox is visible, closed by finish
}

func (s *Server) newSandbox(a *app, im *image, def *pb.Sandbox, tags, vars map[string]string) (*sandbox, error) {
	id := "sb-v2-" + randomID(20)
	sb := &sandbox{
		s:       s,
		id:      id,
		taskID:  "ta-" + randomID(22),
		appID:   a.id,
		env:     a.env,
		imageID: im.id,
		def:     proto.Clone(def).(*pb.Sandbox),
		vars:    vars,
		tags:    tags,
		dir:     filepath.Join(s.dir, id),
		done:    make(chan struct{}),
		execs:   map[string]*proc{},
	}
	sb.root = filepath.Join(sb.dir, "root")
	// The image is the host (or busybox, in chroot mode), with a tree where
	// /tmp and the workdir exist; a snapshot's image brings the tree it
	// saved.
	if im.tree != "" {
		if err := os.MkdirAll(sb.root, 0o755); err != nil {
			return nil, status.Errorf(codes.Internal, "making the sandbox's tree: %v", err)
		}
		if err := busyroot.Copy(im.tree, sb.root); err != nil {
			_ = os.RemoveAll(sb.dir)
			return nil, status.Errorf(codes.Internal, "restoring the snapshot's tree: %v", err)
		}
	}
	for _, d := range []string{"tmp", strings.TrimPrefix(def.GetWorkdir(), "/")} {
		if err := os.MkdirAll(filepath.Join(sb.root, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, status.Errorf(codes.Internal, "making the sandbox's tree: %v", err)
		}
	}
	if err := os.Chmod(filepath.Join(sb.root, "tmp"), os.ModeSticky|0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "making the sandbox's tree: %v", err)
	}
	if s.opts.Busybox != "" {
		if err := installBusybox(sb.root, s.opts.Busybox); err != nil {
			_ = os.RemoveAll(sb.dir)
			return nil, status.Errorf(codes.Internal, "installing busybox in the sandbox: %v", err)
		}
	}
	if err := sb.openTunnels(); err != nil {
		sb.closeTunnels()
		_ = os.RemoveAll(sb.dir)
		return nil, err
	}
	exp := time.Now().Add(time.Duration(def.GetTimeoutSecs()+3600) * time.Second)
	sb.routerJWT = jwt(map[string]any{"exp": exp.Unix(), "task_id": sb.taskID})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sb.closeTunnels()
		_ = os.RemoveAll(sb.dir)
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	sb.created = s.createdAtLocked()
	s.sandboxes[sb.id] = sb
	s.tasks[sb.taskID] = sb
	s.mu.Unlock()
	sb.mu.Lock()
	sb.timer = time.AfterFunc(time.Duration(def.GetTimeoutSecs())*time.Second, func() {
		sb.finish(pb.GenericResult_GENERIC_STATUS_TIMEOUT, "Sandbox timed out")
	})
	sb.mu.Unlock()
	return sb, nil
}

// finish ends the sandbox once: its commands are killed and its tree goes;
// the record stays so that wait and task lookups report how it ended.
func (sb *sandbox) finish(st pb.GenericResult_GenericStatus, msg string) {
	sb.mu.Lock()
	if sb.result != nil {
		sb.mu.Unlock()
		return
	}
	sb.result = pb.GenericResult_builder{Status: st, Exception: msg}.Build()
	close(sb.done)
	procs := make([]*proc, 0, len(sb.execs))
	for _, p := range sb.execs {
		procs = append(procs, p)
	}
	timer := sb.timer
	sb.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	sb.closeTunnels()
	for _, p := range procs {
		p.kill()
	}
	if sb.s.opts.Busybox != "" {
		busyroot.KillRooted(sb.root) // what left its group, too
	}
	_ = os.RemoveAll(sb.dir)
}

func (sb *sandbox) resultOrNil() *pb.GenericResult {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.result
}

func (sb *sandbox) hasTags(want map[string]string) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for k, v := range want {
		if have, ok := sb.tags[k]; !ok || have != v {
			return false
		}
	}
	return true
}

func (sb *sandbox) tagList() []*pb.SandboxTag {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := make([]*pb.SandboxTag, 0, len(sb.tags))
	for k, v := range sb.tags {
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
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return SandboxState{
		ID:         sb.id,
		AppID:      sb.appID,
		ImageID:    sb.imageID,
		Definition: proto.Clone(sb.def).(*pb.Sandbox),
		Env:        maps.Clone(sb.vars),
		Tags:       maps.Clone(sb.tags),
		Result:     sb.result,
		Dir:        sb.root,
	}, true
}

// Running returns the IDs of the sandboxes that have not ended.
func (s *Server) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, sb := range s.sandboxes {
		select {
		case <-sb.done:
		default:
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
