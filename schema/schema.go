// Package schema holds the JSON Schema (draft 2020-12) of every event of
// foldstream's wire contract, one file per event under v1/, so that bots
// and builders in any language can validate what they send and receive.
// The files are embedded for Go programs that want to validate at run
// time; schema_test.go checks them against real messages of the processor.
package schema

import "embed"

// V1 holds v1/turn.json, note.json, control.json, summary-updated.json and
// lifecycle.json, and the recall endpoint's recall-request.json and
// recall-response.json.
//
//go:embed v1/*.json
var V1 embed.FS

// Files maps each event to its schema file in V1.
var Files = map[string]string{
	"turn":            "v1/turn.json",
	"note":            "v1/note.json",
	"control":         "v1/control.json",
	"summary-updated": "v1/summary-updated.json",
	"lifecycle":       "v1/lifecycle.json",
	// The recall endpoint of the service (<prefix>.svc.recall).
	"recall-request":  "v1/recall-request.json",
	"recall-response": "v1/recall-response.json",
}
