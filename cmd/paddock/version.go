package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/paddock-sandbox/paddock/client"
)

// versionTimeout bounds the health request of "paddock version".
const versionTimeout = 3 * time.Second

// version is set at build time with -ldflags "-X main.version=..." (see
// the Makefile); it is the only variable of the package.
var version string

// cliVersion is the version set at build time, else the module version the
// binary was built from, else the SDK's version.
func cliVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	v := client.Version
	if ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

// cmdVersion implements "paddock version": the client's version and, when
// the daemon answers, the server's.
func (c *cli) cmdVersion(ctx context.Context, args []string) error {
	fs := c.flagSet("version")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("version", "unexpected argument %q", pos[0])
	}
	fmt.Fprintf(c.stdout, "client: paddock %s (%s, %s/%s)\n", cliVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	cl := c.client()
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	h, err := cl.Health(ctx)
	if err != nil {
		fmt.Fprintf(c.stdout, "server: unreachable at %s: %s\n", cl.ResolvedURL(), oneLine(err.Error()))
		return nil
	}
	_, err = fmt.Fprintf(c.stdout, "server: paddockd %s at %s (%s)\n", h.Version, cl.ResolvedURL(), h.Status)
	return err
}
