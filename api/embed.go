// Package api holds agentd's HTTP contract, api/openapi.yaml (OpenAPI 3.1).
//
// The document is embedded so that the server can serve exactly the contract
// it was built with (GET /openapi.yaml) and so that tests can check the router
// against it: a route that is served but not documented, or documented but
// not served, fails the build's tests instead of surprising a client.
package api

import _ "embed"

// OpenAPI is the content of openapi.yaml, the OpenAPI 3.1 description of every
// route, request, response, error and server-sent event of agentd's HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte
