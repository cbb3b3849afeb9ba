// Package integration holds Paddock's end-to-end tests: each starts a real
// paddockd (built by `make build`) with a temporary state directory and
// drives it through the Go SDK and the CLI. They need root.
//
//	go test ./integration/ -args -paddock.bin=$PWD/bin
//
// PADDOCK_TEST_RUNTIME selects the OCI runtime (runc by default, or crun).
// Long variants run with -paddock.long.
package integration
