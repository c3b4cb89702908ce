package modaltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// fsToolsPath is the program the SDK's Filesystem calls exec with a JSON
// command as its one argument.
const fsToolsPath = "/__modal/.bin/modal-sandbox-fs-tools"

// fsCommand is the JSON the SDK sends: one key naming the operation.
type fsCommand struct {
	ListFiles     *fsArgs `json:"ListFiles"`
	Stat          *fsArgs `json:"Stat"`
	ReadFile      *fsArgs `json:"ReadFile"`
	WriteFile     *fsArgs `json:"WriteFile"`
	MakeDirectory *fsArgs `json:"MakeDirectory"`
	Remove        *fsArgs `json:"Remove"`
}

type fsArgs struct {
	Path      string `json:"path"`
	Parents   bool   `json:"parents"`
	Recursive bool   `json:"recursive"`
}

// fsInfo is the tool's file description, as the SDK's FileInfo decodes it.
type fsInfo struct {
	Name          string  `json:"name"`
	Path          string  `json:"path"`
	Type          string  `json:"type"`
	Size          int64   `json:"size"`
	Mode          uint32  `json:"mode"` // st_mode, type bits included
	Permissions   string  `json:"permissions"`
	Owner         string  `json:"owner"`
	Group         string  `json:"group"`
	ModifiedTime  float64 `json:"modified_time"`
	SymlinkTarget *string `json:"symlink_target"`
}

// fsError is the payload the tool prints on stderr when it fails.
type fsError struct {
	Kind    string `json:"error_kind"`
	Message string `json:"message"`
	Detail  string `json:"detail"`
}

func (e *fsError) Error() string { return e.Kind + ": " + e.Message }

// runFSTool runs one tool command on the sandbox's tree through the
// engine, so that no path or symlink reaches outside it. It returns the
// exit code.
func runFSTool(sb *fakeengine.Sandbox, args []string, in io.Reader, stdout, stderr io.Writer) int32 {
	err := fsTool(sb, args, in, stdout)
	if err == nil {
		return 0
	}
	var fe *fsError
	if !errors.As(err, &fe) {
		fe = &fsError{Kind: "Other", Message: err.Error()}
	}
	b, _ := json.Marshal(fe)
	_, _ = stderr.Write(b)
	return 1
}

func fsTool(sb *fakeengine.Sandbox, args []string, in io.Reader, out io.Writer) error {
	if len(args) != 1 {
		return &fsError{Kind: "InvalidArgument", Message: "expected one JSON command"}
	}
	var c fsCommand
	if err := json.Unmarshal([]byte(args[0]), &c); err != nil {
		return &fsError{Kind: "InvalidArgument", Message: "malformed command"}
	}
	switch {
	case c.ListFiles != nil:
		fis, err := sb.List(c.ListFiles.Path, false)
		if err != nil {
			return fsErr(err)
		}
		infos := make([]fsInfo, 0, len(fis))
		for _, fi := range fis {
			infos = append(infos, describe(fi))
		}
		return json.NewEncoder(out).Encode(infos)
	case c.Stat != nil:
		fi, err := sb.Stat(c.Stat.Path, false)
		if err != nil {
			return fsErr(err)
		}
		return json.NewEncoder(out).Encode(describe(fi))
	case c.ReadFile != nil:
		f, _, err := sb.Open(c.ReadFile.Path)
		if err != nil {
			return fsErr(err)
		}
		defer f.Close()
		_, err = io.Copy(out, f)
		return fsErr(err)
	case c.WriteFile != nil:
		_, err := sb.WriteFile(c.WriteFile.Path, in, 0)
		return fsErr(err)
	case c.MakeDirectory != nil:
		return fsErr(sb.Mkdir(c.MakeDirectory.Path, 0o755, c.MakeDirectory.Parents))
	case c.Remove != nil:
		return fsErr(sb.Remove(c.Remove.Path, c.Remove.Recursive))
	}
	return &fsError{Kind: "InvalidArgument", Message: "unknown command"}
}

var fsTypes = map[fakeengine.FileType]string{
	fakeengine.FileRegular: "file", fakeengine.FileDir: "directory",
	fakeengine.FileSymlink: "symlink", fakeengine.FileOther: "other",
}

func describe(fi fakeengine.FileInfo) fsInfo {
	info := fsInfo{
		Name: fi.Name, Path: fi.Path, Type: fsTypes[fi.Type], Size: fi.Size, Mode: fi.Sys.Mode,
		Permissions: fmt.Sprintf("%04o", fi.Mode.Perm()),
		Owner:       fmt.Sprint(fi.Sys.Uid), Group: fmt.Sprint(fi.Sys.Gid),
		ModifiedTime: float64(fi.ModTime.UnixNano()) / 1e9,
	}
	if fi.Type == fakeengine.FileSymlink {
		info.SymlinkTarget = &fi.Target
	}
	return info
}

// fsErr maps the engine's errors onto the tool's error kinds.
func fsErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fakeengine.ErrRelative):
		return &fsError{Kind: "InvalidArgument", Message: "Path must be absolute"}
	case errors.Is(err, fakeengine.ErrRoot):
		return &fsError{Kind: "PermissionDenied", Message: "Refusing to remove /"}
	case errors.Is(err, fs.ErrNotExist):
		return &fsError{Kind: "NotFound", Message: "No such file or directory"}
	case errors.Is(err, fs.ErrExist):
		return &fsError{Kind: "PathAlreadyExists", Message: "Path already exists"}
	case errors.Is(err, syscall.ENOTDIR):
		return &fsError{Kind: "NotDirectory", Message: "Not a directory"}
	case errors.Is(err, syscall.EISDIR):
		return &fsError{Kind: "IsDirectory", Message: "Is a directory"}
	case errors.Is(err, syscall.ENOTEMPTY):
		return &fsError{Kind: "DirectoryNotEmpty", Message: "Directory not empty"}
	case errors.Is(err, fs.ErrPermission):
		return &fsError{Kind: "PermissionDenied", Message: "Permission denied"}
	}
	return &fsError{Kind: "Other", Message: "I/O error"}
}
