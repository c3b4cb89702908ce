// Command daytonatest serves package daytonatest's fake Daytona API on a
// loopback port until it is interrupted, so that scripts and clients in
// other languages (the official SDKs) can run against it. It prints the
// variables the SDKs read, one per line, ready for a shell's eval:
//
//	DAYTONA_API_URL=http://127.0.0.1:PORT/api
//	DAYTONA_API_KEY=...
//
// Commands in its sandboxes run confined to a busybox tree, which needs a
// static busybox, and root or user namespaces; without them files work and
// commands fail.
// It is a test double: it isolates nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-sh/berth/providers/daytona/daytonatest"
)

func main() {
	var o daytonatest.Options
	flag.StringVar(&o.Listen, "listen", "127.0.0.1:0", "address to serve on")
	flag.StringVar(&o.APIKey, "key", os.Getenv("DAYTONA_API_KEY"), "API key to accept (default $DAYTONA_API_KEY, else a random one)")
	flag.StringVar(&o.Dir, "dir", "", "directory for the sandboxes' files (default a temporary one, removed on exit)")
	flag.DurationVar(&o.Minute, "minute", time.Minute, "length of an auto-stop, auto-delete and TTL minute")
	flag.IntVar(&o.CPUQuota, "cpu-quota", 0, "total vCPU quota (0: none)")
	flag.IntVar(&o.MemoryQuotaGB, "memory-quota", 0, "total memory quota in GB (0: none)")
	flag.IntVar(&o.DiskQuotaGB, "disk-quota", 0, "total disk quota in GB (0: none)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: daytonatest [flags]")
		os.Exit(2)
	}
	s, err := daytonatest.New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "daytonatest:", err)
		os.Exit(1)
	}
	defer s.Close()
	if why := daytonatest.Available(); why != "" {
		fmt.Fprintln(os.Stderr, "daytonatest: commands will fail:", why)
	}
	fmt.Printf("DAYTONA_API_URL=%s\nDAYTONA_API_KEY=%s\n", s.URL(), s.APIKey())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
