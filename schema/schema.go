// Package schema holds the JSON Schema (draft 2020-12) of every message of
// foldstream's wire contract, one file per message under v1/, so that bots,
// builders and context sources in any language can validate what they
// send and receive. The files are embedded for Go programs that want to
// validate at run time; schema_test.go checks them against real messages
// of the processor, the context service and the Go client.
package schema

import "embed"

// V1 holds every schema of contract v1: the inbound events turn.json,
// note.json and control.json; the outbound events summary-updated.json,
// lifecycle.json, evicted.json (mode evict) and memory.json; the recall
// endpoint's recall-request.json and recall-response.json; the session
// endpoint's session-request.json and session-reply.json; the context
// endpoint's context-request.json and context-reply.json; and the
// context-source protocol's context-source-request.json and
// context-source-reply.json.
//
//go:embed v1/*.json
var V1 embed.FS

// Files maps each message to its schema file in V1; it lists every file.
var Files = map[string]string{
	// Inbound: <prefix>.in.<session>.<event>.
	"turn":    "v1/turn.json",
	"note":    "v1/note.json",
	"control": "v1/control.json",
	// Outbound: <prefix>.out.<session>.summary, .event, .evicted, .memory.
	"summary-updated": "v1/summary-updated.json",
	"lifecycle":       "v1/lifecycle.json",
	"evicted":         "v1/evicted.json",
	"memory":          "v1/memory.json",
	// The recall endpoint of the service (<prefix>.svc.recall).
	"recall-request":  "v1/recall-request.json",
	"recall-response": "v1/recall-response.json",
	// The session endpoint (<prefix>.svc.session).
	"session-request": "v1/session-request.json",
	"session-reply":   "v1/session-reply.json",
	// The context endpoint of the service (<prefix>.svc.context).
	"context-request": "v1/context-request.json",
	"context-reply":   "v1/context-reply.json",
	// The context-source protocol: what the processor asks a context
	// source (calendar, mail, …) on its subject at a fold of mode interval,
	// and its reply.
	"context-source-request": "v1/context-source-request.json",
	"context-source-reply":   "v1/context-source-reply.json",
}
