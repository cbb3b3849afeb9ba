package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the REST API (api/openapi.yaml),
// embedded so that paddockd can serve it at GET /v1/openapi.yaml and the SDKs
// can be checked against it. It describes the same types as this package;
// openapi_test.go keeps the two in step.
//
//go:embed openapi.yaml
var OpenAPI []byte
