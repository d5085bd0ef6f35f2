package contextsource

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Version is the context-source protocol version every request and reply
// carries in "v".
const Version = 1

// Request is what the processor sends a context source at a fold: give a
// summary of the window [From, To] of session Session. Both times are the
// timestamps of the first and last turns being compacted (RFC 3339, UTC on
// the wire).
type Request struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	// Prompt is the source's configured prompt, if any: what to report.
	Prompt string `json:"prompt,omitempty"`
}

// Instruction is the request as one sentence, for a source that
// hands it to a language model: "Provide a contextual summary for the
// period from <from> to <to>. <prompt>".
func (r Request) Instruction() string {
	s := "Provide a contextual summary for the period from " + r.From.UTC().Format(time.RFC3339) +
		" to " + r.To.UTC().Format(time.RFC3339) + "."
	if p := strings.TrimSpace(r.Prompt); p != "" {
		s += " " + p
	}
	return s
}

// Validate checks a request as a source receives it; an error is an
// *events.ValidationError naming the field.
func (r Request) Validate() error {
	if r.V != Version {
		if r.V == 0 {
			return missing("v", fmt.Sprintf("%d", Version))
		}
		return &events.ValidationError{Code: events.CodeVersion, Field: "v", Reason: fmt.Sprintf("unsupported version %d, expected %d", r.V, Version)}
	}
	if err := events.CheckSession("session", r.Session); err != nil {
		return err
	}
	if r.From.IsZero() {
		return missing("from", "the start of the window, RFC 3339")
	}
	if r.To.IsZero() {
		return missing("to", "the end of the window, RFC 3339")
	}
	if r.To.Before(r.From) {
		return invalid("to", "%s is before from %s", r.To.Format(time.RFC3339), r.From.Format(time.RFC3339))
	}
	return nil
}

// DecodeRequest parses and validates a request's JSON.
func DecodeRequest(data []byte) (Request, error) {
	var r Request
	if err := json.Unmarshal(data, &r); err != nil {
		return Request{}, &events.ValidationError{Code: events.CodeBadJSON,
			Reason: fmt.Sprintf("expected a JSON object {\"v\":1,\"session\",\"from\",\"to\",\"prompt\"?}: %v", err)}
	}
	return r, r.Validate()
}

// Reply is a context source's answer: Text, or Error when the source could
// not answer (a source may instead reply with the micro service error
// headers; the Asker accepts both). An empty Text means nothing to report.
type Reply struct {
	V     int     `json:"v"`
	Text  *string `json:"text,omitempty"`
	Error string  `json:"error,omitempty"`
}

// TextReply is the reply {v, text}.
func TextReply(text string) Reply { return Reply{V: Version, Text: &text} }

// ErrorReply is the reply {v, error}.
func ErrorReply(msg string) Reply { return Reply{V: Version, Error: msg} }

// decodeReply reads a reply body: the text, or an error saying what is
// wrong with the reply or what the source reported.
func decodeReply(data []byte) (string, error) {
	var r Reply
	if err := json.Unmarshal(data, &r); err != nil {
		return "", fmt.Errorf("bad reply: expected a JSON object {\"v\":1,\"text\"} or {\"v\":1,\"error\"}: %v", err)
	}
	switch {
	case r.V != Version:
		// A JetStream PubAck ({"stream":…,"seq":…}) lands here when the
		// subject is captured by a stream.
		return "", fmt.Errorf("bad reply: field \"v\": expected %d, got %d (is the subject captured by a JetStream stream?)", Version, r.V)
	case strings.TrimSpace(r.Error) != "":
		return "", &SourceError{Description: r.Error}
	case r.Text == nil:
		return "", fmt.Errorf("bad reply: neither \"text\" nor \"error\"")
	}
	return *r.Text, nil
}

// SourceError is an error a context source reported: with the micro
// service error headers (Code and Description) or a reply {v, error}
// (Description only).
type SourceError struct {
	Code        string
	Description string
}

func (e *SourceError) Error() string {
	if e.Code == "" {
		return "source error: " + e.Description
	}
	return "source error " + e.Code + ": " + e.Description
}
