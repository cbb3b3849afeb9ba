// Package api holds the wire types of the Paddock REST API (/v1): requests,
// responses, stream events, error codes and the code ↔ HTTP status table. It
// is the contract shared by the daemon, the guest agent, the Go SDK and the
// CLI.
//
// The contract has one source, api/openapi.yaml. The structs and constants
// of the <group>.gen.go files (one per x-file group of schemas) and the
// error table of errors.gen.go (StatusOf, CodeOf) are generated from it, as
// are the Python and TypeScript SDK types and error classes; edit the YAML and run `make generate` (go run
// ./internal/apigen). `make check-generated`, part of `make test`, fails
// when a generated file is out of date. The routes the daemon serves are a
// table in internal/server whose test checks it against the document's
// paths, both ways.
package api

// This file holds what is not generated.

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the REST API (api/openapi.yaml),
// embedded so that paddockd can serve it at GET /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// ContentTypeNDJSON is the media type of event streams.
const ContentTypeNDJSON = "application/x-ndjson"
