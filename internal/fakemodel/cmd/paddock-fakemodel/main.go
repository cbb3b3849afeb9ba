// Command paddock-fakemodel serves the fakemodel package's Examples script
// over HTTP for the Python and TypeScript test suites, which have no Go of
// their own: one fake model API for the Go, Python and TypeScript tests.
// It is a test tool, built into bin/ by `make build` and never shipped.
//
//	paddock-fakemodel [-listen 127.0.0.1:0] [-api-key KEY] [-check-replays=true]
//
// It prints its base URL (http://127.0.0.1:PORT) on a line of its own on
// stdout once it listens, and serves until SIGTERM or SIGINT:
//
//	POST /v1/messages          Anthropic Messages API (base URL: the URL)
//	POST /v1/chat/completions  OpenAI Chat Completions (base URL: URL + "/v1")
//	POST /v1/responses         OpenAI Responses
//	GET  /fake/requests        the requests received so far, oldest first, as
//	                           a JSON array of {api, path, status, error,
//	                           stream, body}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/internal/fakemodel"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-fakemodel:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	key := flag.String("api-key", "", "the only API key accepted (default: any non-empty key)")
	replays := flag.Bool("check-replays", true, "refuse tool calls handed back changed or made up")
	flag.Parse()
	var opts []fakemodel.Option
	if *key != "" {
		opts = append(opts, fakemodel.APIKey(*key))
	}
	if *replays {
		opts = append(opts, fakemodel.CheckReplays())
	}
	fake := fakemodel.New(fakemodel.Examples(), opts...)
	mux := http.NewServeMux()
	mux.Handle("/v1/", fake)
	mux.HandleFunc("GET /fake/requests", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(requestLog(fake.Requests()))
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("http://%s\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loggedRequest is one entry of GET /fake/requests.
type loggedRequest struct {
	API    string `json:"api"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	Stream bool   `json:"stream"`
	// Body is the request's JSON, or a string when it was not JSON.
	Body any `json:"body"`
}

func requestLog(reqs []fakemodel.Request) []loggedRequest {
	out := make([]loggedRequest, 0, len(reqs))
	for _, r := range reqs {
		var body any = string(r.Body)
		if json.Valid(r.Body) {
			body = r.Body
		}
		out = append(out, loggedRequest{API: r.API, Path: r.Path, Status: r.Status, Error: r.Error, Stream: r.Stream, Body: body})
	}
	return out
}
