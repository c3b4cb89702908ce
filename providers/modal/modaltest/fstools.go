package modaltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
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

// runFSTool runs one tool command on the tree at rootDir through os.Root,
// so that no path or symlink reaches outside it. It returns the exit code.
func runFSTool(rootDir string, args []string, in io.Reader, stdout, stderr io.Writer) int32 {
	err := fsTool(rootDir, args, in, stdout)
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

func fsTool(rootDir string, args []string, in io.Reader, out io.Writer) error {
	if len(args) != 1 {
		return &fsError{Kind: "InvalidArgument", Message: "expected one JSON command"}
	}
	var c fsCommand
	if err := json.Unmarshal([]byte(args[0]), &c); err != nil {
		return &fsError{Kind: "InvalidArgument", Message: "malformed command"}
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	switch {
	case c.ListFiles != nil:
		return listFiles(root, c.ListFiles.Path, out)
	case c.Stat != nil:
		name, err := relName(c.Stat.Path)
		if err != nil {
			return err
		}
		fi, err := root.Lstat(name)
		if err != nil {
			return fsErr(err)
		}
		return json.NewEncoder(out).Encode(describe(root, name, c.Stat.Path, fi))
	case c.ReadFile != nil:
		return readFile(root, c.ReadFile.Path, out)
	case c.WriteFile != nil:
		return writeFile(root, c.WriteFile.Path, in)
	case c.MakeDirectory != nil:
		name, err := relName(c.MakeDirectory.Path)
		if err != nil {
			return err
		}
		if c.MakeDirectory.Parents {
			return fsErr(root.MkdirAll(name, 0o755))
		}
		return fsErr(root.Mkdir(name, 0o755))
	case c.Remove != nil:
		name, err := relName(c.Remove.Path)
		if err != nil {
			return err
		}
		if name == "." {
			return &fsError{Kind: "PermissionDenied", Message: "Refusing to remove /"}
		}
		if _, err := root.Lstat(name); err != nil {
			return fsErr(err)
		}
		if c.Remove.Recursive {
			return fsErr(root.RemoveAll(name))
		}
		return fsErr(root.Remove(name))
	}
	return &fsError{Kind: "InvalidArgument", Message: "unknown command"}
}

// relName turns an absolute sandbox path into a name under the root.
func relName(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", &fsError{Kind: "InvalidArgument", Message: "Path must be absolute"}
	}
	name := strings.TrimPrefix(path.Clean(p), "/")
	if name == "" {
		name = "."
	}
	return name, nil
}

func listFiles(root *os.Root, p string, out io.Writer) error {
	name, err := relName(p)
	if err != nil {
		return err
	}
	fi, err := root.Stat(name)
	if err != nil {
		return fsErr(err)
	}
	if !fi.IsDir() {
		return &fsError{Kind: "NotDirectory", Message: "Not a directory"}
	}
	d, err := root.Open(name)
	if err != nil {
		return fsErr(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fsErr(err)
	}
	slices.Sort(names)
	infos := []fsInfo{}
	for _, n := range names {
		child := path.Join(name, n)
		cfi, err := root.Lstat(child)
		if err != nil {
			continue // removed while listing
		}
		infos = append(infos, describe(root, child, path.Join(path.Clean(p), n), cfi))
	}
	return json.NewEncoder(out).Encode(infos)
}

func readFile(root *os.Root, p string, out io.Writer) error {
	name, err := relName(p)
	if err != nil {
		return err
	}
	f, err := root.Open(name)
	if err != nil {
		return fsErr(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return &fsError{Kind: "IsDirectory", Message: "Is a directory"}
	}
	_, err = io.Copy(out, f)
	return fsErr(err)
}

// writeFile creates or truncates the file from stdin, making parents. A new
// file is 0644; an existing one keeps its mode.
func writeFile(root *os.Root, p string, in io.Reader) error {
	name, err := relName(p)
	if err != nil {
		return err
	}
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fsErr(err)
		}
	}
	if fi, err := root.Stat(name); err == nil && fi.IsDir() {
		return &fsError{Kind: "IsDirectory", Message: "Is a directory"}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fsErr(err)
	}
	_, err = io.Copy(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return fsErr(err)
}

func describe(root *os.Root, name, p string, fi fs.FileInfo) fsInfo {
	info := fsInfo{
		Name:         path.Base(p),
		Path:         p,
		Size:         fi.Size(),
		Permissions:  fmt.Sprintf("%04o", fi.Mode().Perm()),
		ModifiedTime: float64(fi.ModTime().UnixNano()) / 1e9,
		Type:         "file",
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Mode = st.Mode
		info.Owner, info.Group = fmt.Sprint(st.Uid), fmt.Sprint(st.Gid)
	}
	switch {
	case fi.IsDir():
		info.Type = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		info.Type = "symlink"
		if t, err := root.Readlink(name); err == nil {
			info.SymlinkTarget = &t
		}
	case !fi.Mode().IsRegular():
		info.Type = "other"
	}
	return info
}

// fsErr maps an OS error onto the tool's error kinds.
func fsErr(err error) error {
	switch {
	case err == nil:
		return nil
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
