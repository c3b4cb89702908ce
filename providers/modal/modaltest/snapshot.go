package modaltest

import (
	"context"
	"os"
	"path/filepath"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TaskSnapshotFilesystem saves a running sandbox's tree as a new image,
// which SandboxCreateV2 (through ImageFromId) starts sandboxes from. The
// client names each snapshot (snapshot_id): a retried request gets the
// image the first one made.
func (r *router) TaskSnapshotFilesystem(ctx context.Context, req *pb.TaskSnapshotFilesystemRequest) (*pb.TaskSnapshotFilesystemResponse, error) {
	sb, err := r.task(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetSnapshotId() == "":
		return nil, status.Error(codes.InvalidArgument, "snapshot id is empty")
	case req.GetContainerId() != "":
		return nil, status.Error(codes.Unimplemented, "modaltest: sidecar containers are not implemented")
	case req.HasTtlSeconds() && req.GetTtlSeconds() < 0:
		return nil, status.Error(codes.InvalidArgument, "ttl must not be negative")
	}
	s := r.s
	s.mu.Lock()
	id, done := s.snapshots[req.GetSnapshotId()]
	s.mu.Unlock()
	if done {
		return pb.TaskSnapshotFilesystemResponse_builder{ImageId: id}.Build(), nil
	}
	if sb.resultOrNil() != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "Sandbox %s has already finished", sb.id)
	}
	im := &image{id: "im-" + randomID(22), ref: "snapshot of " + sb.id,
		result: pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build()}
	im.tree = filepath.Join(s.imageDir, im.id)
	if err := sb.eb.CopyTree(im.tree); err != nil {
		_ = os.RemoveAll(im.tree)
		return nil, status.Errorf(codes.FailedPrecondition, "saving the snapshot: %v", err)
	}
	s.mu.Lock()
	s.imagesByID[im.id] = im
	s.snapshots[req.GetSnapshotId()] = im.id
	s.mu.Unlock()
	return pb.TaskSnapshotFilesystemResponse_builder{ImageId: im.id}.Build(), nil
}

// ImageFromId answers for a built image or a snapshot's; others are
// NOT_FOUND.
func (c *control) ImageFromId(_ context.Context, req *pb.ImageFromIdRequest) (*pb.ImageFromIdResponse, error) {
	c.s.mu.Lock()
	im, ok := c.s.imagesByID[req.GetImageId()]
	built := ok && im.result.GetStatus() == pb.GenericResult_GENERIC_STATUS_SUCCESS
	c.s.mu.Unlock()
	if !built {
		return nil, status.Errorf(codes.NotFound, "Image %s not found", short(req.GetImageId()))
	}
	return pb.ImageFromIdResponse_builder{ImageId: im.id}.Build(), nil
}
