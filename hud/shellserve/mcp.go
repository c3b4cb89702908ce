package shellserve

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth/sandbox"
)

// Bounds of the MCP tools.
const (
	MaxOutput         = 64 << 10 // bash output kept: the tail
	MaxReadFile       = 1 << 20
	DefaultBashTimout = 10 * time.Minute
	MaxBashTimeout    = time.Hour
)

// BashIn is the bash tool's input.
type BashIn struct {
	Command    string  `json:"command" jsonschema:"the command, run by bash (sh where the image has no bash) in the task's working directory"`
	TimeoutSec float64 `json:"timeout_sec,omitempty" jsonschema:"kill the command after this many seconds (default 600, at most 3600)"`
}

// BashOut is the bash tool's structured result.
type BashOut struct {
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output" jsonschema:"stdout and stderr together; only the last 64 KiB"`
	Dropped  int64  `json:"dropped_bytes,omitempty"`
}

// PathIn names a file or directory; relative paths are under the working
// directory.
type PathIn struct {
	Path string `json:"path"`
}

// WriteIn is write_file's input.
type WriteIn struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// FileOut is read_file's result.
type FileOut struct {
	Content string `json:"content"`
}

// ListOut is list_dir's result.
type ListOut struct {
	Entries []Entry `json:"entries"`
}

// Entry is one directory entry.
type Entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// NewMCP returns an MCP server whose tools act on the sandbox target
// names: bash, read_file, write_file and list_dir.
func NewMCP(name, version string, target TargetFunc) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "bash", Description: "Run a shell command in the task's sandbox and return its exit code and output."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in BashIn) (*mcp.CallToolResult, BashOut, error) {
			t, err := target(ctx)
			if err != nil {
				return nil, BashOut{}, err
			}
			return bash(ctx, t, in)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a text file (at most 1 MiB) from the task's sandbox."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PathIn) (*mcp.CallToolResult, FileOut, error) {
			t, err := target(ctx)
			if err != nil {
				return nil, FileOut{}, err
			}
			p := t.abs(in.Path)
			fi, err := t.Sandbox.Stat(ctx, p)
			if err != nil {
				return nil, FileOut{}, err
			}
			if fi.Size > MaxReadFile {
				return nil, FileOut{}, fmt.Errorf("%s is %d bytes; read_file reads at most %d (use bash with head or tail)", p, fi.Size, MaxReadFile)
			}
			b, err := t.Sandbox.ReadFile(ctx, p)
			if err != nil {
				return nil, FileOut{}, err
			}
			return text(string(b)), FileOut{Content: string(b)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file in the task's sandbox, creating its parent directories."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in WriteIn) (*mcp.CallToolResult, struct{}, error) {
			t, err := target(ctx)
			if err != nil {
				return nil, struct{}{}, err
			}
			p := t.abs(in.Path)
			if err := t.Sandbox.WriteFile(ctx, p, []byte(in.Content), 0o644); err != nil {
				return nil, struct{}{}, err
			}
			return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p)), struct{}{}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_dir", Description: "List a directory in the task's sandbox."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PathIn) (*mcp.CallToolResult, ListOut, error) {
			t, err := target(ctx)
			if err != nil {
				return nil, ListOut{}, err
			}
			ents, err := t.Sandbox.ListDir(ctx, t.abs(in.Path))
			if err != nil {
				return nil, ListOut{}, err
			}
			out := ListOut{Entries: make([]Entry, 0, len(ents))}
			var b strings.Builder
			for _, e := range ents {
				out.Entries = append(out.Entries, Entry{Name: e.Name, Type: typeName(e), Size: e.Size})
				fmt.Fprintf(&b, "%s\t%s\t%d\n", typeName(e), e.Name, e.Size)
			}
			return text(b.String()), out, nil
		})
	return s
}

func bash(ctx context.Context, t Target, in BashIn) (*mcp.CallToolResult, BashOut, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, BashOut{}, fmt.Errorf("command is empty")
	}
	limit := DefaultBashTimout
	if in.TimeoutSec > 0 {
		limit = min(time.Duration(in.TimeoutSec*float64(time.Second)), MaxBashTimeout)
	}
	out := &tail{max: MaxOutput}
	res, err := t.Sandbox.Run(ctx, sandbox.Command{Args: bashOrSh(in.Command), Dir: t.Dir, Stdout: out, Stderr: out, Timeout: limit})
	if err != nil {
		if sandbox.ClassOf(err) == sandbox.DeadlineExceeded {
			s, _ := out.String()
			return nil, BashOut{}, fmt.Errorf("command timed out after %v; output so far:\n%s", limit, s)
		}
		return nil, BashOut{}, err
	}
	s, dropped := out.String()
	msg := s
	if dropped > 0 {
		msg = fmt.Sprintf("[%d bytes of output dropped]\n%s", dropped, s)
	}
	msg += fmt.Sprintf("\n[exit code %d]", res.ExitCode)
	return text(msg), BashOut{ExitCode: res.ExitCode, Output: s, Dropped: dropped}, nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func typeName(fi sandbox.FileInfo) string {
	switch fi.Type {
	case sandbox.FileDir:
		return "dir"
	case sandbox.FileSymlink:
		return "symlink"
	case sandbox.FileRegular:
		return "file"
	}
	return "other"
}
