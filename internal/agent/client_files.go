package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// File is a file's content read from an agent; Close releases it.
type File struct {
	io.Reader
	// Size is the file's size as the agent declared it; Reader yields at
	// most that many bytes.
	Size  int64
	close func() error
}

// Close ends the download.
func (f *File) Close() error { return f.close() }

// ReadFile opens a regular file for reading. A file larger than maxBytes
// is refused with sandbox.ErrTooLarge.
func (c *Client) ReadFile(ctx context.Context, id, path string, maxBytes int64) (*File, error) {
	a, err := c.do(ctx, id, call{method: http.MethodGet, path: "/files", query: url.Values{"path": {path}},
		timeout: fileTimeout, ok: []int{http.StatusOK}})
	if err != nil {
		return nil, err
	}
	size := a.ContentLength
	switch {
	case size > maxBytes:
		a.Close()
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", sandbox.ErrTooLarge, path, maxBytes)
	case size < 0:
		size = maxBytes
	}
	return &File{Reader: io.LimitReader(a.Body, size), Size: a.ContentLength, close: a.Close}, nil
}

// WriteFile writes size bytes of r (size -1: unknown) to path atomically,
// creating its parents. mode is octal permission bits such as "0644"
// (empty: the agent's default); the agent validates it.
func (c *Client) WriteFile(ctx context.Context, id, path, mode string, r io.Reader, size int64) (*api.FileEntry, error) {
	q := url.Values{"path": {path}}
	if mode != "" {
		q.Set("mode", mode)
	}
	if r == nil {
		r, size = http.NoBody, 0
	}
	var e api.FileEntry
	err := c.jsonCall(ctx, id, call{method: http.MethodPut, path: "/files", query: q, body: r, length: size,
		timeout: fileTimeout, ok: []int{http.StatusOK, http.StatusCreated}}, maxSmallAnswer, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// DeleteFile removes a file, or a directory (with its content if
// recursive).
func (c *Client) DeleteFile(ctx context.Context, id, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.jsonCall(ctx, id, call{method: http.MethodDelete, path: "/files", query: q, timeout: Grace,
		ok: []int{http.StatusNoContent, http.StatusOK}}, 0, nil)
}

// ListFiles lists a directory tree depth levels deep (0: the agent's
// default); path "" is the working directory.
func (c *Client) ListFiles(ctx context.Context, id, path string, depth int) (*api.ListFilesResponse, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if depth != 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out api.ListFilesResponse
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/files/list", query: q, timeout: Grace,
		ok: []int{http.StatusOK}}, maxAnswer(api.MaxOutputBytes), &out)
	if err != nil {
		return nil, err
	}
	if out.Entries == nil {
		out.Entries = []api.FileEntry{}
	}
	return &out, nil
}

// StatFile describes one file, following symlinks.
func (c *Client) StatFile(ctx context.Context, id, path string) (*api.FileEntry, error) {
	var e api.FileEntry
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/files/stat", query: url.Values{"path": {path}},
		timeout: Grace, ok: []int{http.StatusOK}}, maxSmallAnswer, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// Mkdir creates a directory and its parents; mode as for WriteFile.
func (c *Client) Mkdir(ctx context.Context, id, path, mode string) (*api.FileEntry, error) {
	q := url.Values{"path": {path}}
	if mode != "" {
		q.Set("mode", mode)
	}
	var e api.FileEntry
	err := c.jsonCall(ctx, id, call{method: http.MethodPost, path: "/files/mkdir", query: q, timeout: Grace,
		ok: []int{http.StatusOK, http.StatusCreated}}, maxSmallAnswer, &e)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// Ports lists the TCP ports processes in the sandbox listen on (at most
// 1024, each 1-65535).
func (c *Client) Ports(ctx context.Context, id string) ([]ListeningPort, error) {
	var got struct {
		Ports []ListeningPort `json:"ports"`
	}
	err := c.jsonCall(ctx, id, call{method: http.MethodGet, path: "/ports", timeout: Grace, ok: []int{http.StatusOK}},
		maxSmallAnswer, &got)
	if err != nil {
		return nil, err
	}
	out := make([]ListeningPort, 0, len(got.Ports))
	for _, p := range got.Ports {
		if p.Port >= 1 && p.Port <= 65535 && len(out) < maxPorts {
			out = append(out, p)
		}
	}
	return out, nil
}

// DialPort connects to TCP port inside sandbox id through its agent
// (GET /connect with Upgrade: paddock-tcp). The handshake is bounded by
// ctx and Grace; the connection then lasts until closed.
func (c *Client) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	conn, err := c.dial(ctx, id)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(Grace)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	fmt.Fprintf(conn, "GET /connect?port=%d HTTP/1.1\r\nHost: agent\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", port, UpgradeTCP)
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		err := readError(resp)
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads through the bufio.Reader that parsed the upgrade.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
