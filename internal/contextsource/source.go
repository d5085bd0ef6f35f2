// Package contextsource implements mode interval's context sources: services
// (calendar, mail, …) that the processor asks, at each fold of mode
// interval, for a short summary of the compacted time window, and that it
// merges into the session summary block.
//
// A context source is a NATS request-reply service on a subject of its
// own (see docs/context-sources.md). The processor side is an Asker: it
// asks every configured Source concurrently, each within its own timeout,
// and never fails a fold: a source that is slow, absent or failing gives
// an Answer with a status, which Block renders as a short note line so
// the gap is visible. The source side is Serve (or Handler), which speaks
// the protocol for a Go function.
//
// Wire contract v1: a Request {v, session, from, to, prompt} and a Reply
// {v, text} or an error, either as the micro service error headers
// (Nats-Service-Error, Nats-Service-Error-Code) or as {v, error}; the JSON
// Schemas are schema/v1/context-source-request.json and
// context-source-reply.json.
package contextsource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
)

// Limits of a Source.
const (
	// DefaultTimeout is how long a source has to answer when its Timeout
	// is zero.
	DefaultTimeout = 2 * time.Second
	// MaxTimeout bounds a source's Timeout: a fold waits for its slowest
	// source.
	MaxTimeout = 30 * time.Second
	// MaxLabelLen bounds a label, in characters.
	MaxLabelLen = 40
	// MaxSubjectLen bounds a subject, in bytes.
	MaxSubjectLen = 256
	// MaxPromptLen bounds a prompt, in bytes.
	MaxPromptLen = 4096
)

// conversationLabel labels the conversation line of a block; no source may
// use it.
const conversationLabel = "Conversation"

// Source is one configured context source.
type Source struct {
	// Label names the source's line in the summary block ("Calendar"):
	// 1-40 characters, no colon, no control characters, not
	// "Conversation".
	Label string `json:"label"`
	// Subject is the NATS subject the source answers on, without
	// wildcards, e.g. "ctx.calendar".
	Subject string `json:"subject"`
	// Prompt is sent with every request: what the source should report
	// ("Summarize events that occurred and upcoming events in the next 4
	// hours."). Optional.
	Prompt string `json:"prompt,omitempty"`
	// Timeout is how long the source has to answer: zero means
	// DefaultTimeout, at most MaxTimeout.
	Timeout time.Duration `json:"-"`
}

// EffectiveTimeout is the source's Timeout, or DefaultTimeout when zero.
func (s Source) EffectiveTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

// Validate checks the source; an error is an *events.ValidationError
// naming the field ("label", "subject", "prompt", "timeout").
func (s Source) Validate() error {
	switch n := utf8.RuneCountInString(s.Label); {
	case strings.TrimSpace(s.Label) == "":
		return missing("label", "a name for the source's line in the summary, e.g. \"Calendar\"")
	case !utf8.ValidString(s.Label):
		return invalid("label", "must be valid UTF-8")
	case n > MaxLabelLen:
		return invalid("label", "at most %d characters, got %d", MaxLabelLen, n)
	case strings.TrimSpace(s.Label) != s.Label:
		return invalid("label", "must not start or end with a space, got %q", s.Label)
	case strings.ContainsRune(s.Label, ':'):
		return invalid("label", "must not contain a colon (the summary line is \"<label>: <text>\"), got %q", s.Label)
	case strings.IndexFunc(s.Label, unicode.IsControl) >= 0:
		return invalid("label", "must not contain control characters or line breaks")
	case strings.EqualFold(s.Label, conversationLabel):
		return invalid("label", "%q is the conversation's line in the summary; choose another label", s.Label)
	}
	if err := checkSubject(s.Subject); err != nil {
		return err
	}
	if len(s.Prompt) > MaxPromptLen {
		return invalid("prompt", "at most %d bytes, got %d", MaxPromptLen, len(s.Prompt))
	}
	if !utf8.ValidString(s.Prompt) {
		return invalid("prompt", "must be valid UTF-8")
	}
	if s.Timeout < 0 || s.Timeout > MaxTimeout {
		return invalid("timeout", "must be between 0 (default %s) and %s, got %s", DefaultTimeout, MaxTimeout, s.Timeout)
	}
	return nil
}

// checkSubject accepts a literal NATS subject: dot-separated non-empty
// tokens, no wildcard, no whitespace or control characters.
func checkSubject(subj string) error {
	if subj == "" {
		return missing("subject", "the NATS subject the source answers on, e.g. \"ctx.calendar\"")
	}
	if len(subj) > MaxSubjectLen {
		return invalid("subject", "at most %d bytes, got %d", MaxSubjectLen, len(subj))
	}
	if !utf8.ValidString(subj) {
		return invalid("subject", "must be valid UTF-8")
	}
	for i, tok := range strings.Split(subj, ".") {
		switch {
		case tok == "":
			return invalid("subject", "empty token %d in %q (tokens are separated by single dots, none at either end)", i+1, subj)
		case tok == "*" || tok == ">":
			return invalid("subject", "must not contain wildcards (%q in %q): a source answers on one literal subject", tok, subj)
		case strings.IndexFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return invalid("subject", "must not contain spaces or control characters, got %q", subj)
		}
	}
	return nil
}

// sourceJSON is a Source in configuration: the timeout is a Go duration
// string ("2s", "1500ms") or a number of seconds.
type sourceJSON struct {
	Label   string          `json:"label"`
	Subject string          `json:"subject"`
	Prompt  string          `json:"prompt,omitempty"`
	Timeout json.RawMessage `json:"timeout,omitempty"`
}

// MarshalJSON writes the timeout as a duration string.
func (s Source) MarshalJSON() ([]byte, error) {
	t, _ := json.Marshal(s.EffectiveTimeout().String())
	return json.Marshal(sourceJSON{Label: s.Label, Subject: s.Subject, Prompt: s.Prompt, Timeout: t})
}

// UnmarshalJSON reads a source; the timeout is a duration string ("2s")
// or a number of seconds (2.5). It does not validate.
func (s *Source) UnmarshalJSON(data []byte) error {
	var raw sourceJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name, _ := strconv.Unquote(f)
			return invalid(name, "not a field of a context source; expected label, subject, prompt or timeout")
		} else if ve := events.DecodeError(err); ve != nil {
			return ve
		}
		return err
	}
	d, err := parseTimeout(raw.Timeout)
	if err != nil {
		return err
	}
	*s = Source{Label: raw.Label, Subject: raw.Subject, Prompt: raw.Prompt, Timeout: d}
	return nil
}

func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		d, err := time.ParseDuration(str)
		if err != nil {
			return 0, invalid("timeout", "expected a duration like \"2s\" or \"1500ms\", got %q", str)
		}
		return d, nil
	}
	secs, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || secs > 1e6 || secs < -1e6 { // Validate checks the range
		return 0, invalid("timeout", "expected a duration like \"2s\" or a number of seconds, got %s", raw)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// ParseSources reads a JSON array of sources, e.g.
//
//	[{"label":"Calendar","subject":"ctx.calendar","prompt":"Events that occurred and the next 4 hours.","timeout":"2s"},
//	 {"label":"Mail","subject":"ctx.mail"}]
//
// It validates each one (an error names the index and the field), rejects
// unknown fields and duplicate labels, and fills in the default timeout.
// Blank input is no sources.
func ParseSources(data []byte) ([]Source, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("context sources: expected a JSON array of {\"label\",\"subject\",\"prompt\"?,\"timeout\"?}: %w", err)
	}
	out := make([]Source, 0, len(raws))
	labels := map[string]int{}
	for i, raw := range raws {
		var s Source
		if err := s.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("context sources [%d]: %w", i, err)
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("context sources [%d]: %w", i, err)
		}
		key := strings.ToLower(s.Label)
		if j, dup := labels[key]; dup {
			return nil, fmt.Errorf("context sources [%d]: %w", i, invalid("label", "%q is already the label of source [%d]; labels name the lines of the summary and must differ", s.Label, j))
		}
		labels[key] = i
		s.Timeout = s.EffectiveTimeout()
		out = append(out, s)
	}
	return out, nil
}

// LoadSources reads the value of a --context-sources flag, environment
// variable or config setting: a JSON array itself, or else the path of a
// file holding one. Blank is no sources.
func LoadSources(value string) ([]Source, error) {
	v := strings.TrimSpace(value)
	if v == "" || strings.HasPrefix(v, "[") {
		return ParseSources([]byte(v))
	}
	data, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("context sources: expected a JSON array or the path of a file holding one: %w", err)
	}
	srcs, err := ParseSources(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v, err)
	}
	return srcs, nil
}

// Sources is a flag.Value for a --context-sources flag: Set takes what
// LoadSources takes.
type Sources []Source

// Set replaces the sources with those of value.
func (s *Sources) Set(value string) error {
	srcs, err := LoadSources(value)
	if err != nil {
		return err
	}
	*s = srcs
	return nil
}

// String is the sources as a JSON array ("" when there are none).
func (s *Sources) String() string {
	if s == nil || len(*s) == 0 {
		return ""
	}
	data, _ := json.Marshal([]Source(*s))
	return string(data)
}

func missing(field, expected string) error {
	return &events.ValidationError{Code: events.CodeMissingField, Field: field, Reason: "required, expected " + expected}
}

func invalid(field, format string, args ...any) error {
	return &events.ValidationError{Code: events.CodeInvalidField, Field: field, Reason: fmt.Sprintf(format, args...)}
}
