// Command envserver is a minimal OpenEnv env server for the tests of
// `berth openenv up`: it stands in for an env image's own server (often
// Python and uvicorn). GET /health answers once --delay has passed after
// start; POST /reset and POST /step answer OpenEnv's observation shape,
// the observation carrying the message given and the value of $ENV_MARK,
// so that a test sees the server it started, with its environment.
// --exit-after makes it die before it is healthy.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/berth-sh/berth/internal/httpserve"
)

func main() {
	addr := flag.String("addr", "0.0.0.0:8000", "listen address")
	delay := flag.Duration("delay", 0, "answer /health only after this long")
	exitAfter := flag.Duration("exit-after", 0, "exit with status 3 after this long, saying so")
	flag.Parse()
	start := time.Now()
	if *exitAfter > 0 {
		time.AfterFunc(*exitAfter, func() {
			fmt.Fprintln(os.Stderr, "envserver: giving up on purpose")
			os.Exit(3)
		})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		if time.Since(start) < *delay {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"healthy"}`)
	})
	obs := func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"observation": map[string]any{"echo": body, "mark": os.Getenv("ENV_MARK"), "path": r.URL.Path},
			"reward":      nil, "done": false,
		})
	}
	mux.HandleFunc("POST /reset", obs)
	mux.HandleFunc("POST /step", obs)
	fmt.Fprintln(os.Stderr, "envserver: listening on", *addr)
	ln, err := net.Listen("tcp", *addr)
	if err == nil {
		err = httpserve.NewServer(mux, 0).Serve(httpserve.Listener(ln))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "envserver:", err)
		os.Exit(1)
	}
}
