package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/berth
//
// When it is empty the module version from the build info is used.
var version string

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print berth's version, the Go version it was built with, and os/arch",
		Example: `  berth version
  # berth v0.1.0 go1.26.8 linux/amd64`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(a.stdout, "berth %s %s %s/%s\n",
				buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		}),
	}
}

// buildVersion is the link-time version, else the module version, else
// "(devel)" with the VCS revision when the build recorded one.
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "(devel)"
	}
	return "devel-" + rev + dirty
}
