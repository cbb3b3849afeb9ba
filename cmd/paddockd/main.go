// Command paddockd is the Paddock daemon: it serves the REST API, runs
// sandboxes through an OCI runtime, and enforces their leases.
//
//	paddockd [serve] [flags]           run the daemon
//	paddockd keys create --name N      print a new API key
//	paddockd keys list                 list API keys (names and ids)
//	paddockd version
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `paddockd: the Paddock sandbox daemon

Usage:
  paddockd [serve] [flags]              run the daemon (as root)
  paddockd keys create --name NAME      create an API key and print it on stdout
  paddockd keys list                    list API keys
  paddockd version                      print the version

Run "paddockd serve --help" or "paddockd keys create --help" for flags.
`

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "keys":
		err = keys(args)
	case "version":
		fmt.Println("paddockd", version)
	case "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "paddockd: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddockd:", err)
		os.Exit(1)
	}
}
