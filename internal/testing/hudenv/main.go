// Command hudenv is a small HUD environment server for tests: it stands
// where HUD's own `hud serve env.py --host H --port P` stands in a HUD
// environment image, since HUD's Python package cannot be installed on
// berth's CI. It is written from HUD's wire (newline-delimited JSON-RPC
// 2.0 over raw TCP, see shared/facts/hud-nemo-gym.md) and shares no code
// with package hud, so that berth's client and `berth hud up` are checked
// against a server that is not berth's.
//
// Its tasks are the non-empty lines of the env file named on the command
// line, read from the working directory: a test that sees them knows the
// server ran in the image's /app. tasks.start answers with the task's line
// as the prompt; tasks.grade scores 1 when the answer equals the task id.
//
// Tests build it with testbin.Static and put it into an image as
// /usr/local/bin/hud; it is never part of berth.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
)

func main() {
	if len(os.Args) < 3 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: hud serve ENV_FILE [--host H] [--port P]")
		os.Exit(2)
	}
	envFile := os.Args[2]
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1", "listen host")
	port := fs.Int("port", 8765, "listen port")
	_ = fs.Parse(os.Args[3:])
	body, err := os.ReadFile(envFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hud:", err)
		os.Exit(1)
	}
	var tasks []string
	for _, l := range strings.Split(string(body), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			tasks = append(tasks, l)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hud:", err)
		os.Exit(1)
	}
	// HUD's server announces its port this way.
	fmt.Printf("HUD_SERVE_PORT=%d\n", ln.Addr().(*net.TCPAddr).Port)
	var sessions atomic.Int64
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hud:", err)
			os.Exit(1)
		}
		go serve(c, tasks, &sessions)
	}
}

type request struct {
	ID     json.RawMessage            `json:"id"`
	Method string                     `json:"method"`
	Params map[string]json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// serve answers one control connection until it says bye or drops.
func serve(c net.Conn, tasks []string, sessions *atomic.Int64) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	enc := json.NewEncoder(c) // one compact object and a newline per frame
	session, started := "", ""
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			_ = enc.Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": rpcError{-32700, "parse error"}})
			return
		}
		var result any
		var fail *rpcError
		switch req.Method {
		case "hello":
			if session == "" {
				session = fmt.Sprintf("sess-%08d", sessions.Add(1))
			}
			result = map[string]any{"session_id": session, "env": map[string]string{"name": "hudenv-test", "version": "0.0.1"}, "bindings": []any{}}
		case "tasks.list":
			list := []map[string]any{}
			for _, t := range tasks {
				id, desc, _ := strings.Cut(t, " ")
				list = append(list, map[string]any{"id": id, "description": strings.TrimSpace(desc), "args": map[string]any{}})
			}
			result = map[string]any{"tasks": list}
		case "tasks.start":
			var id string
			_ = json.Unmarshal(req.Params["id"], &id)
			for _, t := range tasks {
				if tid, desc, _ := strings.Cut(t, " "); tid == id {
					started, result = id, map[string]any{"prompt": strings.TrimSpace(desc)}
				}
			}
			if result == nil {
				fail = &rpcError{-32602, fmt.Sprintf("unknown task %q", id)}
			}
		case "tasks.grade":
			var answer string
			_ = json.Unmarshal(req.Params["answer"], &answer)
			if started == "" {
				fail = &rpcError{-32600, "no task in progress"}
				break
			}
			score := 0.0
			if answer == started {
				score = 1
			}
			result, started = map[string]any{"score": score, "done": true, "isError": false}, ""
		case "tasks.cancel":
			result, started = map[string]any{"cancelled": true}, ""
		case "bye":
			_ = enc.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"goodbye": true}})
			return
		default:
			fail = &rpcError{-32601, fmt.Sprintf("Method not found: %s", req.Method)}
		}
		frame := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if fail != nil {
			frame["error"] = fail
		} else {
			frame["result"] = result
		}
		if err := enc.Encode(frame); err != nil {
			return
		}
	}
}
