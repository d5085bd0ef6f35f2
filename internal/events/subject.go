package events

import (
	"fmt"
	"strings"
)

// DefaultPrefix is the first subject token of every foldstream subject.
const DefaultPrefix = "fold"

// MaxSessionLen bounds a session id; it is one subject token and a KV key.
const MaxSessionLen = 128

// Inbound event kinds: the last token of fold.in.<session>.<kind>.
const (
	KindTurn    = "turn"
	KindNote    = "note"
	KindControl = "control"
)

// Outbound event kinds: the last token of fold.out.<session>.<kind>.
const (
	KindSummary = "summary"
	KindEvent   = "event"
	KindMemory  = "memory"
	KindEvicted = "evicted"
)

// ValidSession reports whether id is usable as a session id:
// [A-Za-z0-9_-]{1,128}. It is checked by hand because it runs per event.
func ValidSession(id string) bool {
	if len(id) == 0 || len(id) > MaxSessionLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckSession returns a *ValidationError for an unusable session id.
func CheckSession(field, id string) error {
	if ValidSession(id) {
		return nil
	}
	reason := fmt.Sprintf("must be 1-%d characters from [A-Za-z0-9_-] (one subject token), got %q", MaxSessionLen, truncateForError(id))
	if id == "" {
		reason = "required, expected a session id matching [A-Za-z0-9_-]{1,128}"
	}
	return &ValidationError{Code: CodeBadSession, Field: field, Reason: reason}
}

// Subjects builds and parses subjects under one prefix.
type Subjects struct {
	Prefix string
	// Partitions is the number of inbound partitions (scale-out); 0 keeps
	// the single-consumer layout. With N > 0 the inbound stream stores
	// <prefix>.in.<session>.<kind> as <prefix>.part.<N>.<k>.<session>.<kind>
	// (see partition.go).
	Partitions int
}

// NewSubjects validates prefix (one or more dot-separated tokens, no
// wildcards) and returns a Subjects.
func NewSubjects(prefix string) (Subjects, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return Subjects{}, fmt.Errorf("subject prefix %q: expected dot-separated tokens without spaces or wildcards", prefix)
		}
	}
	return Subjects{Prefix: prefix}, nil
}

// In is the subject a bot publishes an inbound event of kind to.
func (s Subjects) In(session, kind string) string { return s.Prefix + ".in." + session + "." + kind }

// Out is the subject the processor publishes an outbound event of kind to.
func (s Subjects) Out(session, kind string) string {
	return s.Prefix + ".out." + session + "." + kind
}

// DeadLetter is where a rejected inbound message is kept, with its reason in
// headers. Messages whose session token is unusable go under "_invalid".
func (s Subjects) DeadLetter(session string) string {
	if !ValidSession(session) {
		session = "_invalid"
	}
	return s.Prefix + ".dlq." + session
}

// InAll, OutAll and DeadLetterAll are the stream filters.
func (s Subjects) InAll() string         { return s.Prefix + ".in.>" }
func (s Subjects) OutAll() string        { return s.Prefix + ".out.>" }
func (s Subjects) DeadLetterAll() string { return s.Prefix + ".dlq.>" }

// InSession and OutSession filter one session's events. InSession filters
// the subjects the current layout stores inbound events under: with
// partitions, their partitioned form (any N). A reader of a session's
// history uses InSessionAll (or broker.SessionEvents), which also covers
// the events stored before a change of --partitions.
func (s Subjects) InSession(session string) string {
	if s.Partitions > 0 {
		return s.Prefix + ".part.*.*." + session + ".>"
	}
	return s.Prefix + ".in." + session + ".>"
}
func (s Subjects) OutSession(session string) string { return s.Prefix + ".out." + session + ".>" }

// ParseIn splits an inbound subject into session and kind. The session
// token is returned even when invalid so the dead letter can name it. A
// stored partitioned subject (<prefix>.part.<N>.<k>.<session>.<kind>) is
// accepted too, in any layout, when its partition token is the one the
// stream's transform computes for the session.
func (s Subjects) ParseIn(subject string) (session, kind string, err error) {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".in.")
	if !ok {
		if prest, part := strings.CutPrefix(subject, s.Prefix+".part."); part {
			return s.parsePartitioned(subject, prest)
		}
		return "", "", &ValidationError{Code: CodeBadSubject, Field: "subject", Reason: fmt.Sprintf("expected %s.in.<session>.<turn|note|control>, got %q", s.Prefix, subject)}
	}
	session, kind, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(kind, ".") {
		return session, "", &ValidationError{Code: CodeBadSubject, Field: "subject", Reason: fmt.Sprintf("expected %s.in.<session>.<turn|note|control>, got %q", s.Prefix, subject)}
	}
	if err := CheckSession("subject session token", session); err != nil {
		return session, kind, err
	}
	switch kind {
	case KindTurn, KindNote, KindControl:
	default:
		return session, kind, &ValidationError{Code: CodeUnknownType, Field: "subject", Reason: fmt.Sprintf("unknown event type %q, expected turn, note or control", kind)}
	}
	return session, kind, nil
}

// ParseOut splits an outbound subject into session and kind.
func (s Subjects) ParseOut(subject string) (session, kind string, ok bool) {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".out.")
	if !ok {
		return "", "", false
	}
	session, kind, ok = strings.Cut(rest, ".")
	return session, kind, ok
}
