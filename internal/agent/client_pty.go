package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// maxWatchEvent bounds one line of a watch stream.
const maxWatchEvent = 64 << 10

// DialPTY starts a command on a new terminal in sandbox id (GET /pty with
// query, see api PtyMessage) and returns its WebSocket. An error the agent
// answers instead of the upgrade comes back as *Error. The handshake is
// bounded by ctx and Grace; the socket then lasts until closed.
func (c *Client) DialPTY(ctx context.Context, id string, query url.Values) (*websocket.Conn, error) {
	hctx, cancel := context.WithTimeout(ctx, Grace)
	defer cancel()
	u := url.URL{Scheme: "ws", Host: id, Path: "/pty", RawQuery: query.Encode()}
	conn, resp, err := websocket.Dial(hctx, u.String(), &websocket.DialOptions{HTTPClient: c.hc})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, readError(resp)
		}
		if errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, sandbox.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: terminal handshake: %v", sandbox.ErrUnavailable, err)
	}
	conn.SetReadLimit(PTYOutputChunk + 4096)
	return conn, nil
}

// ListPTYs lists the terminals open in sandbox id.
func (c *Client) ListPTYs(ctx context.Context, id string) (*api.ListPtysResponse, error) {
	var out api.ListPtysResponse
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/pty/list", timeout: Grace, ok: []int{http.StatusOK}},
		maxSmallAnswer, &out)
	if err != nil {
		return nil, err
	}
	if out.Ptys == nil {
		out.Ptys = []api.PtyInfo{}
	}
	return &out, nil
}

// KillPTY kills the command of terminal pty.
func (c *Client) KillPTY(ctx context.Context, id, pty string) error {
	return c.jsonCall(ctx, id, call{method: http.MethodPost, path: "/pty/" + url.PathEscape(pty) + "/kill", timeout: Grace,
		ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}

// WatchFiles opens a watch on directory path (GET /files/watch). The
// watch is in place when it returns; the caller must Close the stream.
func (c *Client) WatchFiles(ctx context.Context, id, path string, recursive bool) (*WatchEvents, error) {
	q := url.Values{"path": {path}, "recursive": {strconv.FormatBool(recursive)}}
	a, err := c.do(ctx, id, call{method: http.MethodGet, path: "/files/watch", query: q, accept: api.ContentTypeNDJSON,
		ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(a.Body)
	sc.Buffer(make([]byte, 4096), maxWatchEvent)
	return &WatchEvents{a: a, sc: sc}, nil
}

// WatchEvents is a stream of file watch events read from an agent.
type WatchEvents struct {
	a  *answer
	sc *bufio.Scanner
}

// Next returns the next event; an error once the stream ended.
func (w *WatchEvents) Next() (api.WatchEvent, error) {
	var ev api.WatchEvent
	if !w.sc.Scan() {
		if err := w.sc.Err(); err != nil {
			return ev, fmt.Errorf("%w: agent watch stream: %v", sandbox.ErrUnavailable, err)
		}
		return ev, io.EOF
	}
	if err := json.Unmarshal(w.sc.Bytes(), &ev); err != nil {
		return ev, fmt.Errorf("%w: agent watch stream: %v", sandbox.ErrUnavailable, err)
	}
	switch ev.Type {
	case api.WatchCreate, api.WatchWrite, api.WatchRemove, api.WatchRename, api.WatchOverflow:
		return ev, nil
	}
	return ev, fmt.Errorf("%w: agent sent a watch event of type %q", sandbox.ErrUnavailable, ev.Type)
}

// Close ends the stream (and the watch).
func (w *WatchEvents) Close() error { return w.a.Close() }
