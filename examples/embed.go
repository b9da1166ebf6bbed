// Package examples holds the example chat specs of examples/*.json, embedded
// so that the web console can offer them (they run as they are with the
// built-in replay models).
package examples

import "embed"

// FS holds every example spec, at its file name (e.g. "debate.json").
//
//go:embed *.json
var FS embed.FS
