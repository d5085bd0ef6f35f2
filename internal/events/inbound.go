package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is the wire contract version every event carries in "v".
const Version = 1

// Roles a turn may have.
var validRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true}

// Turn is one transcript turn: fold.in.<session>.turn.
type Turn struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	TurnID  string    `json:"turn_id"`
	At      time.Time `json:"at"`
	Speaker string    `json:"speaker"`
	Role    string    `json:"role"`
	Text    string    `json:"text"`
	// Kind is free-form: speech, chat, tool_call, tool_result, ...
	Kind string `json:"kind,omitempty"`
	// Tool names the tool of a tool_call/tool_result turn.
	Tool string `json:"tool,omitempty"`
	// Tokens is the turn's own token count if the bot knows it
	// (0..MaxTokens).
	Tokens int `json:"tokens,omitempty"`
	// ContextTokens is the provider-reported prompt size of the bot's last
	// model call (most accurate signal), 0..MaxTokens.
	ContextTokens int               `json:"context_tokens,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`
}

// Note is a screen-watch/visual note the bot evicted from its live buffer:
// fold.in.<session>.note.
type Note struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	NoteID  string    `json:"note_id"`
	At      time.Time `json:"at"`
	Source  string    `json:"source,omitempty"`
	Text    string    `json:"text"`
}

// Control operations.
const (
	OpCompact   = "compact"
	OpEnd       = "end"
	OpReset     = "reset"
	OpGenerate  = "generate"
	OpConfigure = "configure"
)

// Control is fold.in.<session>.control.
type Control struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	Op      string    `json:"op"`
	At      time.Time `json:"at,omitempty"`
	// Config carries per-session overrides for op "configure".
	Config *SessionConfig `json:"config,omitempty"`
}

// SessionConfig is a per-session override; zero fields keep the default.
// Which fields a mode reads is in the README's modes table.
type SessionConfig struct {
	// Mode selects the engine: window (the default), evict,
	// interval or tokens.
	Mode string `json:"mode,omitempty"`

	// window
	RecentWindow    int    `json:"recent_window,omitempty"`
	BatchSize       int    `json:"batch_size,omitempty"`
	MaxSummaryChars int    `json:"max_summary_chars,omitempty"`
	MaxNoteChars    int    `json:"max_note_chars,omitempty"`
	Trigger         string `json:"trigger,omitempty"` // "turn" | "generate"
	Profile         string `json:"profile,omitempty"` // "voice" | "agent"
	Disabled        *bool  `json:"disabled,omitempty"`
	// MinFoldTokens amortizes folds in mode window: a due fold waits until
	// the turns behind the recent window hold this many tokens, then folds
	// them in one call. Set, 0 turns it off for the session (folds
	// of batch_size turns); absent keeps the processor's --min-fold-tokens.
	MinFoldTokens *int `json:"min_fold_tokens,omitempty"`

	// tokens and evict: the model's context window and the headroom kept
	// for its answer; the trigger is context_window − reserve_tokens.
	ContextWindow int `json:"context_window,omitempty"`
	ReserveTokens int `json:"reserve_tokens,omitempty"`
	// tokens: fold a quiet session at the lower idle threshold (a fraction
	// of the window) once it has been idle for idle_after_seconds; fold at
	// once above emergency_threshold.
	IdleAfterSeconds   int     `json:"idle_after_seconds,omitempty"`
	IdleThreshold      float64 `json:"idle_threshold,omitempty"`
	EmergencyThreshold float64 `json:"emergency_threshold,omitempty"`
	// tokens: the verbatim tail is the larger of keep_recent_tokens and
	// keep_recent_messages.
	KeepRecentTokens   int `json:"keep_recent_tokens,omitempty"`
	KeepRecentMessages int `json:"keep_recent_messages,omitempty"`

	// evict
	TargetUtilization float64 `json:"target_utilization,omitempty"`
	MinKeepMessages   int     `json:"min_keep_messages,omitempty"`

	// interval: fold every interval_exchanges exchanges (an exchange
	// completes with the bot's answer, a turn with role assistant),
	// keeping the last keep_recent turns verbatim.
	IntervalExchanges int `json:"interval_exchanges,omitempty"`
	KeepRecent        int `json:"keep_recent,omitempty"`

	// Tool results older than this are masked before summarizing
	// (observation masking); 0 keeps the deployment's setting.
	MaskToolOutputsAfterSeconds int `json:"mask_tool_outputs_after_seconds,omitempty"`

	// Reset policy: manual (the default), daily (at reset_hour
	// UTC) or idle (after reset_idle_minutes without events).
	ResetPolicy      string `json:"reset_policy,omitempty"`
	ResetHour        *int   `json:"reset_hour,omitempty"`
	ResetIdleMinutes int    `json:"reset_idle_minutes,omitempty"`
}

// MaxTokens bounds a turn's tokens and context_tokens: no model's
// context window is larger (context_window accepts up to as much), and
// bounding them keeps every sum the processor forms over a session far
// from overflow. schema/v1/turn.json states the same range.
const MaxTokens = 10_000_000

// MaxMinFoldTokens bounds min_fold_tokens: a fold of more than this would
// not fit a summarizer's context window anyway.
const MaxMinFoldTokens = 1_000_000

// Session modes: the registered modes, for Go callers. SessionConfig.Validate
// accepts every mode registered in internal/fold (one file each; Modes),
// whether or not it is named here.
const (
	ModeWindow   = "window"
	ModeEvict    = "evict"
	ModeInterval = "interval"
	ModeTokens   = "tokens"
)

// Modes are the modes a configure may name: those registered in
// internal/fold, in the docs' order (generated into settings_gen.go, so
// that the wire contract does not import the engine).
func Modes() []string { return append([]string(nil), modeNames...) }

// Reset policies.
const (
	ResetManual = "manual"
	ResetDaily  = "daily"
	ResetIdle   = "idle"
)

// Limits bound what the processor accepts. Zero fields take the defaults.
type Limits struct {
	MaxPayloadBytes int // whole message
	MaxTextBytes    int // turn/note text
	MaxIDLen        int // turn_id, note_id
	MaxSpeakerLen   int
}

// DefaultLimits are generous for chat and voice and still bound a turn that
// carries a whole tool output.
func DefaultLimits() Limits {
	return Limits{MaxPayloadBytes: 256 << 10, MaxTextBytes: 64 << 10, MaxIDLen: 256, MaxSpeakerLen: 128}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxPayloadBytes <= 0 {
		l.MaxPayloadBytes = d.MaxPayloadBytes
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	if l.MaxIDLen <= 0 {
		l.MaxIDLen = d.MaxIDLen
	}
	if l.MaxSpeakerLen <= 0 {
		l.MaxSpeakerLen = d.MaxSpeakerLen
	}
	return l
}

// Inbound is one decoded, validated inbound event; exactly one of Turn, Note
// and Control is set.
type Inbound struct {
	Kind    string
	Session string
	Turn    *Turn
	Note    *Note
	Control *Control
}

// DecodeTurn decodes a turn payload that was validated when it was applied
// (a fold reading its batch back): the fast path of DecodeInbound, without
// validation.
func DecodeTurn(data []byte, t *Turn) error {
	if decodeTurnFast(data, t) {
		return nil
	}
	*t = Turn{}
	return json.Unmarshal(data, t)
}

// DecodeInbound decodes and validates the payload of an inbound event of
// kind for subjectSession. Unknown JSON fields are accepted (they stay in the
// stream for replay) so that newer bots can talk to older processors.
func DecodeInbound(kind, subjectSession string, data []byte, lim Limits) (Inbound, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxPayloadBytes {
		return Inbound{}, &ValidationError{Code: CodeOversized, Field: "payload", Reason: fmt.Sprintf("%d bytes, expected at most %d", len(data), lim.MaxPayloadBytes)}
	}
	if err := CheckSession("subject session token", subjectSession); err != nil {
		return Inbound{}, err
	}
	in := Inbound{Kind: kind, Session: subjectSession}
	var err error
	switch kind {
	case KindTurn:
		in.Turn = new(Turn)
		if !decodeTurnFast(data, in.Turn) {
			*in.Turn = Turn{}
			err = decodeJSON(data, in.Turn)
		}
		if err == nil {
			err = in.Turn.Validate(subjectSession, lim)
		}
	case KindNote:
		in.Note = new(Note)
		if err = decodeJSON(data, in.Note); err == nil {
			err = in.Note.Validate(subjectSession, lim)
		}
	case KindControl:
		in.Control = new(Control)
		if err = decodeJSON(data, in.Control); err == nil {
			err = in.Control.Validate(subjectSession)
		}
	default:
		return Inbound{}, &ValidationError{Code: CodeUnknownType, Field: "subject", Reason: fmt.Sprintf("unknown event type %q, expected turn, note or control", truncateForError(kind))}
	}
	if err != nil {
		return Inbound{}, err
	}
	return in, nil
}

func decodeJSON(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return &ValidationError{Code: CodeBadJSON, Field: "payload", Reason: "empty, expected a JSON object"}
	}
	if data[0] != '{' {
		return &ValidationError{Code: CodeBadJSON, Field: "payload", Reason: "expected a JSON object starting with '{'"}
	}
	// encoding/json silently replaces invalid UTF-8 with U+FFFD; a bot that
	// sends broken bytes should hear about it instead.
	if !utf8.Valid(data) {
		return &ValidationError{Code: CodeInvalidField, Field: "payload", Reason: "expected valid UTF-8 JSON"}
	}
	if err := json.Unmarshal(data, v); err != nil {
		if ve := DecodeError(err); ve != nil {
			return ve
		}
		return &ValidationError{Code: CodeBadJSON, Field: "payload", Reason: "not valid JSON: " + err.Error()}
	}
	return nil
}

// DecodeError is the error naming the field of an event's JSON value that
// encoding/json could not decode (err), and what was expected: a value of
// the wrong type, or an "at" that is not an RFC 3339 time (the only time
// field of an inbound event). nil for any other error.
func DecodeError(err error) *ValidationError {
	var ute *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &ute) && ute.Field != "":
		return &ValidationError{Code: CodeInvalidField, Field: ute.Field,
			Reason: fmt.Sprintf("expected a JSON %s, got %s", jsonKind(ute.Type.Kind().String()), ute.Value)}
	case errors.As(err, &pe):
		return &ValidationError{Code: CodeInvalidField, Field: "at",
			Reason: fmt.Sprintf("expected an RFC 3339 timestamp like 2026-01-02T15:04:05Z, got %q", truncateForError(pe.Value))}
	case strings.Contains(err.Error(), "parsing time") || strings.Contains(err.Error(), "Time.UnmarshalJSON"):
		return &ValidationError{Code: CodeInvalidField, Field: "at",
			Reason: fmt.Sprintf("expected an RFC 3339 timestamp like 2026-01-02T15:04:05Z (%v)", err)}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "uint64", "float64":
		return "number"
	case "struct", "map":
		return "object"
	case "slice":
		return "array"
	}
	return goKind
}

func checkVersion(v int) error {
	if v == 0 {
		return missing("v", fmt.Sprintf("the contract version %d", Version))
	}
	if v != Version {
		return &ValidationError{Code: CodeVersion, Field: "v", Reason: fmt.Sprintf("version %d is not supported, expected %d", v, Version)}
	}
	return nil
}

func checkBodySession(body, subject string) error {
	if body == "" {
		return missing("session", "the session id, equal to the subject's session token")
	}
	if body != subject {
		return &ValidationError{Code: CodeSessionMismatch, Field: "session", Reason: fmt.Sprintf("%q does not match the subject's session token %q", truncateForError(body), subject)}
	}
	return nil
}

func checkID(field, id string, max int) error {
	if strings.TrimSpace(id) == "" {
		return missing(field, "a non-empty string (the idempotency key)")
	}
	if len(id) > max {
		return invalid(field, "%d bytes, expected at most %d", len(id), max)
	}
	if !utf8.ValidString(id) {
		return invalid(field, "expected valid UTF-8")
	}
	return nil
}

func checkText(field, text string, max int, required bool) error {
	if required && strings.TrimSpace(text) == "" {
		return missing(field, "non-empty text")
	}
	if len(text) > max {
		return &ValidationError{Code: CodeOversized, Field: field, Reason: fmt.Sprintf("%d bytes, expected at most %d", len(text), max)}
	}
	if !utf8.ValidString(text) {
		return invalid(field, "expected valid UTF-8 text")
	}
	return nil
}

// Validate checks a turn against the contract.
func (t *Turn) Validate(subjectSession string, lim Limits) error {
	lim = lim.withDefaults()
	if err := checkVersion(t.V); err != nil {
		return err
	}
	if err := checkBodySession(t.Session, subjectSession); err != nil {
		return err
	}
	if err := checkID("turn_id", t.TurnID, lim.MaxIDLen); err != nil {
		return err
	}
	if t.At.IsZero() {
		return missing("at", "an RFC 3339 timestamp like 2026-01-02T15:04:05Z")
	}
	if strings.TrimSpace(t.Speaker) == "" {
		return missing("speaker", "the speaker's display name, e.g. \"Alice\"")
	}
	if len(t.Speaker) > lim.MaxSpeakerLen || !utf8.ValidString(t.Speaker) {
		return invalid("speaker", "expected valid UTF-8 of at most %d bytes", lim.MaxSpeakerLen)
	}
	if t.Role == "" {
		return missing("role", "one of user, assistant, system, tool")
	}
	if !validRoles[t.Role] {
		return invalid("role", "expected one of user, assistant, system, tool, got %q", truncateForError(t.Role))
	}
	if err := checkText("text", t.Text, lim.MaxTextBytes, true); err != nil {
		return err
	}
	if t.Tokens < 0 || t.Tokens > MaxTokens {
		return invalid("tokens", "expected an integer 0..%d, got %d", MaxTokens, t.Tokens)
	}
	if t.ContextTokens < 0 || t.ContextTokens > MaxTokens {
		return invalid("context_tokens", "expected an integer 0..%d, got %d", MaxTokens, t.ContextTokens)
	}
	return nil
}

// DefaultMaxClockSkew is how far an event's at may be ahead of the time
// the stream stored it (CheckClock) unless the deployment says otherwise.
const DefaultMaxClockSkew = 5 * time.Minute

// At is the bot's timestamp of the event (zero if it has none: a control
// event may omit it).
func (in Inbound) At() time.Time {
	switch {
	case in.Turn != nil:
		return in.Turn.At
	case in.Note != nil:
		return in.Note.At
	case in.Control != nil:
		return in.Control.At
	}
	return time.Time{}
}

// CheckClock rejects an event whose at is more than maxSkew ahead of
// received, the time the inbound stream stored it: the reset policies
// (idle, daily) measure time by at, so one event dated in the future
// would reset its session at once and then hold off every idle reset
// until that date. received is the stream's own timestamp, not the
// processor's clock, so a redelivery, a replay or a restart judges the
// same event the same way. Times in the past are accepted (imports of
// old transcripts). maxSkew <= 0 accepts any time.
func (in Inbound) CheckClock(received time.Time, maxSkew time.Duration) error {
	at := in.At()
	if maxSkew <= 0 || at.IsZero() || received.IsZero() || !at.After(received.Add(maxSkew)) {
		return nil
	}
	return invalid("at", "%s is %s ahead of the time the stream received the event (%s), expected at most %s ahead: check the bot's clock",
		at.UTC().Format(time.RFC3339), at.Sub(received).Round(time.Second), received.UTC().Format(time.RFC3339), maxSkew)
}

// Validate checks a note against the contract.
func (n *Note) Validate(subjectSession string, lim Limits) error {
	lim = lim.withDefaults()
	if err := checkVersion(n.V); err != nil {
		return err
	}
	if err := checkBodySession(n.Session, subjectSession); err != nil {
		return err
	}
	if err := checkID("note_id", n.NoteID, lim.MaxIDLen); err != nil {
		return err
	}
	if n.At.IsZero() {
		return missing("at", "an RFC 3339 timestamp like 2026-01-02T15:04:05Z")
	}
	if len(n.Source) > lim.MaxSpeakerLen || !utf8.ValidString(n.Source) {
		return invalid("source", "expected valid UTF-8 of at most %d bytes", lim.MaxSpeakerLen)
	}
	return checkText("text", n.Text, lim.MaxTextBytes, true)
}

// Validate checks a control event against the contract.
func (c *Control) Validate(subjectSession string) error {
	if err := checkVersion(c.V); err != nil {
		return err
	}
	if err := checkBodySession(c.Session, subjectSession); err != nil {
		return err
	}
	switch c.Op {
	case "":
		return missing("op", "one of compact, end, reset, generate, configure")
	case OpCompact, OpEnd, OpReset, OpGenerate:
		return nil
	case OpConfigure:
		if c.Config == nil {
			return missing("config", "an object with the settings to override for op configure")
		}
		return c.Config.Validate()
	default:
		return invalid("op", "expected one of compact, end, reset, generate, configure, got %q", truncateForError(c.Op))
	}
}

// Validate checks a per-session override: every numeric setting against
// its declared range (Settings), the named values, and the pairs that
// must agree.
func (c *SessionConfig) Validate() error {
	for _, st := range Settings {
		if err := st.check(c); err != nil {
			return err
		}
	}
	switch c.Trigger {
	case "", "turn", "generate":
	default:
		return invalid("config.trigger", "expected turn or generate, got %q", truncateForError(c.Trigger))
	}
	switch c.Profile {
	case "", "voice", "agent":
	default:
		return invalid("config.profile", "expected voice or agent, got %q", truncateForError(c.Profile))
	}
	if c.Mode != "" && !slices.Contains(modeNames, c.Mode) {
		return invalid("config.mode", "expected one of %s, got %q", strings.Join(modeNames, ", "), truncateForError(c.Mode))
	}
	if c.ContextWindow != 0 && c.ReserveTokens >= c.ContextWindow {
		return invalid("config.reserve_tokens", "expected less than context_window (%d), got %d", c.ContextWindow, c.ReserveTokens)
	}
	if c.IdleThreshold != 0 && c.EmergencyThreshold != 0 && c.IdleThreshold >= c.EmergencyThreshold {
		return invalid("config.idle_threshold", "expected below emergency_threshold (%g), got %g", c.EmergencyThreshold, c.IdleThreshold)
	}
	switch c.ResetPolicy {
	case "", ResetManual, ResetIdle:
	case ResetDaily:
		if c.ResetHour == nil {
			return missing("config.reset_hour", "an hour 0..23 (UTC) for reset_policy daily")
		}
	default:
		return invalid("config.reset_policy", "expected manual, daily or idle, got %q", truncateForError(c.ResetPolicy))
	}
	if c.ResetPolicy == ResetIdle && c.ResetIdleMinutes == 0 {
		return missing("config.reset_idle_minutes", "minutes of silence after which reset_policy idle resets the session")
	}
	return nil
}
