// Command berth-agent is the program that runs inside every sandbox as its
// init: the local provider's agent (`berth-agent agent`) and the k8s
// provider's in-pod agent (`berth-agent k8s-agent`), and the tbench2
// OpenEnv server that berth's launcher starts inside a task's sandbox
// (`berth-agent openenv`, package openenv/insandbox). The first two are the berth
// binary's two hidden agent verbs without the rest of the CLI, so that PID 1
// of a sandbox carries none of berth's cloud SDKs, charts or Kubernetes
// client: it starts in a fraction of the time and memory (a sandbox's
// memory limit is charged for the pages of its init's binary that it
// touches), and less code runs where a hostile task can reach it.
//
// The berth binary keeps the same verbs, so a berth without a berth-agent
// beside it still works as its own agent (see providers/local's
// Options.AgentBinary for how the binary is found). Build it static:
//
//	CGO_ENABLED=0 go build ./cmd/berth ./cmd/berth-agent
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/agent/podagent"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: berth-agent agent [--run-dir DIR] | k8s-agent [--install PATH | --untar DIR | --tar PATH] | openenv --tasks DIR [--addr HOST:PORT]\n(started by berth's providers inside sandboxes; people never run it)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch args[0] {
	case "agent":
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		runDir := fs.String("run-dir", "", "listen and read the config in this directory instead of fds 3 and 4")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 0 {
			return 2
		}
		err = localagent.Main(ctx, localagent.Options{RunDir: *runDir})
	case "k8s-agent":
		fs := flag.NewFlagSet("k8s-agent", flag.ContinueOnError)
		install := fs.String("install", "", "copy this binary to `PATH` and exit (the pod's initContainer)")
		untar := fs.String("untar", "", "unpack a tar stream from stdin into `DIR`")
		tarPath := fs.String("tar", "", "write the tree at `PATH` to stdout as tar")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 0 {
			return 2
		}
		switch {
		case *install != "":
			err = podagent.Install(*install)
		case *untar != "":
			err = podagent.Untar(ctx, *untar, os.Stdin)
		case *tarPath != "":
			err = podagent.Tar(ctx, *tarPath, os.Stdout)
		default:
			err = podagent.Main(ctx, podagent.Options{})
		}
	case "openenv":
		err = serveOpenEnv(ctx, args[1:])
		if errors.Is(err, errUsage) {
			return 2
		}
	default:
		fmt.Fprintf(os.Stderr, "berth-agent: unknown verb %q (agent, k8s-agent, openenv)\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth-agent: %v\n", err)
		return 1
	}
	return 0
}
