package agent

import (
	"context"
	"net"
	"net/http"
	"time"
)

// NewHTTPClient returns an HTTP client that reaches the agent listening on
// the unix socket socketPath, whatever the URL's host (use for example
// "http://agent/health"). It uses no proxy and no overall timeout, since
// exec and output streams last as long as their commands; bound calls with
// their contexts.
func NewHTTPClient(socketPath string) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}}
}
