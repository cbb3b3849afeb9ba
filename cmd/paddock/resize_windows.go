//go:build windows

package main

import (
	"context"

	"github.com/paddock-sandbox/paddock/client"
)

// watchResize does nothing on Windows, which has no SIGWINCH: the
// terminal keeps the size it started with.
func watchResize(ctx context.Context, fd int, t *client.Terminal) (stop func()) { return func() {} }
