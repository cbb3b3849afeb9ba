//go:build !windows

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paddock-sandbox/paddock/client"
	"golang.org/x/term"
)

// watchResize resizes t whenever the local terminal fd changes size
// (SIGWINCH) until stop is called.
func watchResize(ctx context.Context, fd int, t *client.Terminal) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				if w, h, err := term.GetSize(fd); err == nil {
					_ = t.Resize(ctx, w, h)
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		cancel()
	}
}
