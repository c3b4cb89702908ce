// Command portserver is the server the conformance suite starts inside a
// sandbox to test Endpoint: on its HTTP port, GET / answers its tag,
// /ws echoes WebSocket messages, POST /sha256 digests the body and GET
// /bytes streams Stream(seed) bytes; on its TCP port it echoes bytes
// until the client half-closes. The suite builds it static and uploads
// it; nothing else uses it.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/coder/websocket"

	"github.com/berth-sh/berth/sandbox/sandboxtest/internal/stream"
)

func main() {
	httpPort := flag.Int("http", 0, "HTTP port (0: none)")
	tcpPort := flag.Int("tcp", 0, "TCP echo port (0: none)")
	tag := flag.String("tag", "", "what GET / answers")
	flag.Parse()
	errs := make(chan error, 2)
	if *tcpPort != 0 {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(*tcpPort))
		if err != nil {
			log.Fatal(err)
		}
		go func() { errs <- echo(ln) }()
	}
	if *httpPort != 0 {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(*httpPort))
		if err != nil {
			log.Fatal(err)
		}
		go func() { errs <- http.Serve(ln, handler(*tag)) }()
	}
	fmt.Fprintln(os.Stderr, "portserver: listening")
	log.Fatal(<-errs)
}

func handler(tag string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "portserver %s\n", tag)
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("POST /sha256", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %s\n", n, hex.EncodeToString(h.Sum(nil)))
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad n", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		_, _ = io.Copy(w, io.LimitReader(stream.New(r.URL.Query().Get("seed")), n))
	})
	return mux
}

// echo sends back what each connection sends, and half-closes after it.
func echo(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			_, _ = io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, buf)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}()
	}
}
