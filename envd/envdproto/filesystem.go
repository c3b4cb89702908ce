package envdproto

import "time"

// Procedures of the filesystem.Filesystem service.
const (
	FilesystemService = "filesystem.Filesystem"
	ProcedureStat     = "/filesystem.Filesystem/Stat"
	ProcedureListDir  = "/filesystem.Filesystem/ListDir"
	ProcedureMakeDir  = "/filesystem.Filesystem/MakeDir"
	ProcedureMove     = "/filesystem.Filesystem/Move"
	ProcedureRemove   = "/filesystem.Filesystem/Remove"
	ProcedureWatchDir = "/filesystem.Filesystem/WatchDir"
)

// FileType is the filesystem.FileType enum, by name.
type FileType string

// FileType values.
const (
	FileTypeUnspecified FileType = "FILE_TYPE_UNSPECIFIED"
	FileTypeFile        FileType = "FILE_TYPE_FILE"
	FileTypeDirectory   FileType = "FILE_TYPE_DIRECTORY"
	FileTypeSymlink     FileType = "FILE_TYPE_SYMLINK"
)

var fileTypeNames = map[int]string{
	0: string(FileTypeUnspecified), 1: string(FileTypeFile),
	2: string(FileTypeDirectory), 3: string(FileTypeSymlink),
}

// UnmarshalJSON accepts the name or the number of the enum value.
func (t *FileType) UnmarshalJSON(data []byte) error {
	v, err := unmarshalEnum(data, fileTypeNames)
	*t = FileType(v)
	return err
}

// EventType is the filesystem.EventType enum, by name.
type EventType string

// EventType values.
const (
	EventTypeUnspecified EventType = "EVENT_TYPE_UNSPECIFIED"
	EventTypeCreate      EventType = "EVENT_TYPE_CREATE"
	EventTypeWrite       EventType = "EVENT_TYPE_WRITE"
	EventTypeRemove      EventType = "EVENT_TYPE_REMOVE"
	EventTypeRename      EventType = "EVENT_TYPE_RENAME"
	EventTypeChmod       EventType = "EVENT_TYPE_CHMOD"
)

var eventTypeNames = map[int]string{
	0: string(EventTypeUnspecified), 1: string(EventTypeCreate), 2: string(EventTypeWrite),
	3: string(EventTypeRemove), 4: string(EventTypeRename), 5: string(EventTypeChmod),
}

// UnmarshalJSON accepts the name or the number of the enum value.
func (t *EventType) UnmarshalJSON(data []byte) error {
	v, err := unmarshalEnum(data, eventTypeNames)
	*t = EventType(v)
	return err
}

// EntryInfo describes one file system entry.
type EntryInfo struct {
	Name        string   `json:"name"`
	Type        FileType `json:"type"`
	Path        string   `json:"path"`
	Size        Int64    `json:"size"`
	Mode        uint32   `json:"mode"`
	Permissions string   `json:"permissions"`
	Owner       string   `json:"owner"`
	Group       string   `json:"group"`
	// ModifiedTime is a google.protobuf.Timestamp: RFC 3339 in UTC.
	ModifiedTime  time.Time `json:"modifiedTime,omitzero"`
	SymlinkTarget *string   `json:"symlinkTarget,omitempty"`
}

// StatRequest asks for one entry.
type StatRequest struct {
	Path string `json:"path"`
}

// StatResponse answers Stat.
type StatResponse struct {
	Entry *EntryInfo `json:"entry,omitempty"`
}

// ListDirRequest lists a directory; Depth 0 counts as 1.
type ListDirRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth,omitempty"`
}

// ListDirResponse answers ListDir.
type ListDirResponse struct {
	Entries []EntryInfo `json:"entries"`
}

// MakeDirRequest creates a directory and its parents.
type MakeDirRequest struct {
	Path string `json:"path"`
}

// MakeDirResponse answers MakeDir.
type MakeDirResponse struct {
	Entry *EntryInfo `json:"entry,omitempty"`
}

// MoveRequest renames an entry.
type MoveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// MoveResponse answers Move.
type MoveResponse struct {
	Entry *EntryInfo `json:"entry,omitempty"`
}

// RemoveRequest deletes a file or a tree.
type RemoveRequest struct {
	Path string `json:"path"`
}

// RemoveResponse answers Remove.
type RemoveResponse struct{}

// WatchDirRequest watches a directory.
type WatchDirRequest struct {
	Path         string `json:"path"`
	Recursive    bool   `json:"recursive,omitempty"`
	IncludeEntry bool   `json:"includeEntry,omitempty"`
}

// WatchDirResponse is one event of a WatchDir stream (a oneof).
type WatchDirResponse struct {
	Start      *struct{}        `json:"start,omitempty"`
	Filesystem *FilesystemEvent `json:"filesystem,omitempty"`
	Keepalive  *KeepAlive       `json:"keepalive,omitempty"`
}

// FilesystemEvent is one change under a watched directory.
type FilesystemEvent struct {
	Name  string     `json:"name"`
	Type  EventType  `json:"type"`
	Entry *EntryInfo `json:"entry,omitempty"`
}

// FileUpload is one element of the JSON array that POST /files answers.
type FileUpload struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"` // always "file"
}

// HTTPError is the body of a non-2xx answer of the plain HTTP routes.
type HTTPError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}
