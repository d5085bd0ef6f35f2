package events

import (
	"strconv"
	"time"
)

// SummaryUpdated is published on fold.out.<session>.summary after every
// successful fold. Version increases by one per fold; Nats-Msg-Id is
// "<session>:summary:<version>" so a re-publish after a crash is dropped by
// the stream.
type SummaryUpdated struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	Version uint64 `json:"version"`
	Summary string `json:"summary"`
	// Cursor is the first turn index not covered by the summary: the builder
	// shows turns from Cursor on verbatim.
	Cursor             int64     `json:"cursor"`
	CoveredThroughTurn int64     `json:"covered_through_turn"`
	From               time.Time `json:"from"`
	To                 time.Time `json:"to"`
	FoldedTurns        int       `json:"folded_turns"`
	FoldedNotes        int       `json:"folded_notes"`
	SummaryChars       int       `json:"summary_chars"`
	SummaryTokens      int       `json:"summary_tokens"`
	OriginalTokens     int       `json:"original_tokens"`
	Mode               string    `json:"mode"`
	Tier               string    `json:"tier"`
	Compactions        int       `json:"compactions"`
	// Epoch counts the session's resets when it was made: a summary of an
	// earlier epoch describes turns from before a reset.
	Epoch     uint32    `json:"epoch,omitempty"`
	Model     string    `json:"model"`
	LatencyMS int64     `json:"latency_ms"`
	At        time.Time `json:"at"`
}

// RecordID is the Nats-Msg-Id of an outbound record (summary, evicted,
// memory) of a session's summary version: "<session>:<kind>:<version>",
// so the stream drops a re-publish of the same version after a crash.
func RecordID(session, kind string, version uint64) string {
	return session + ":" + kind + ":" + strconv.FormatUint(version, 10)
}

// Lifecycle event types on fold.out.<session>.event.
const (
	EventCompactionSkipped   = "compaction_skipped"
	EventCompactionStarted   = "compaction_started"
	EventCompactionCompleted = "compaction_completed"
	EventCompactionFailed    = "compaction_failed"
	EventSessionEnded        = "session_ended"
	EventSessionReset        = "session_reset"
	EventSessionConfigured   = "session_configured"
	EventRejected            = "event_rejected"
	EventSessionArchived     = "session_archived"
	// EventCheckpointQuarantined: the session's checkpoint could not be
	// decoded; it was kept on the dead-letter stream and the session
	// rebuilt from the streams (reason corrupt_checkpoint).
	EventCheckpointQuarantined = "checkpoint_quarantined"
)

// Skip reasons of compaction_skipped (plus retry_backoff: a failed
// fold is retried at the next trigger, but not sooner than its backoff so a
// failing model is not hammered on every turn).
const (
	SkipBelowThreshold  = "below_threshold"
	SkipAlreadyInFlight = "already_in_flight"
	SkipNoEligibleBatch = "no_eligible_batch"
	SkipSessionEnding   = "session_ending"
	SkipDisabled        = "disabled"
	SkipRetryBackoff    = "retry_backoff"
)

// Lifecycle is published on fold.out.<session>.event. Fields not relevant
// to a type are omitted.
type Lifecycle struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	Type    string    `json:"type"`
	At      time.Time `json:"at"`
	FoldID  string    `json:"fold_id,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Trigger string    `json:"trigger,omitempty"` // turn | generate | compact | catch_up | idle | end | retry | resume
	Mode    string    `json:"mode,omitempty"`    // window | evict | interval | tokens
	// Cause is the rule that fired: window, interval, threshold,
	// emergency, idle, forced or end.
	Cause string `json:"cause,omitempty"`
	// Estimate and Limit are the context estimate and the threshold it was
	// held against, in tokens (modes tokens and evict).
	Estimate int `json:"estimate_tokens,omitempty"`
	Limit    int `json:"limit_tokens,omitempty"`
	// Chunks and SkippedTurns report a chunked fold (mode tokens).
	Chunks       int `json:"chunks,omitempty"`
	SkippedTurns int `json:"skipped_turns,omitempty"`
	// MaskedTurns is how many tool turns were masked before summarizing.
	MaskedTurns int `json:"masked_turns,omitempty"`

	Cursor           int64 `json:"cursor"`
	TotalTurns       int64 `json:"total_turns"`
	RecentStart      int64 `json:"recent_start,omitempty"`
	Eligible         int64 `json:"eligible,omitempty"`
	BatchSize        int   `json:"batch_size,omitempty"`
	BatchFrom        int64 `json:"batch_from,omitempty"`
	BatchTo          int64 `json:"batch_to,omitempty"`
	PendingNoteCount int   `json:"pending_note_count,omitempty"`

	OldCursor          int64  `json:"old_cursor,omitempty"`
	NewCursor          int64  `json:"new_cursor,omitempty"`
	CoveredThroughTurn int64  `json:"covered_through_turn,omitempty"`
	SummaryChars       int    `json:"summary_chars,omitempty"`
	Version            uint64 `json:"version,omitempty"`
	Tier               string `json:"tier,omitempty"`
	LatencyMS          int64  `json:"latency_ms,omitempty"`

	Model      string `json:"model,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	Retryable  *bool  `json:"retryable,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Dead-letter headers: the rejected message's payload is kept as is,
// with these instead of its own Nats- and Foldstream- headers. When the
// copy cannot be stored, a reference is: HeaderDeadLetter "reference",
// HeaderCopyError, HeaderOriginalSize and the start of the payload.
const (
	HeaderErrorCode       = "Foldstream-Error-Code"
	HeaderErrorField      = "Foldstream-Error-Field"
	HeaderError           = "Foldstream-Error"
	HeaderOriginalSubject = "Foldstream-Original-Subject"
	HeaderOriginalStream  = "Foldstream-Original-Stream"
	HeaderOriginalSeq     = "Foldstream-Original-Sequence"
	HeaderOriginalMsgID   = "Foldstream-Original-Msg-Id"
	HeaderDeadLetter      = "Foldstream-Dead-Letter"
	HeaderCopyError       = "Foldstream-Copy-Error"
	HeaderOriginalSize    = "Foldstream-Original-Size"
)

// Evicted is published on fold.out.<session>.evicted when mode evict drops
// turns: builders put Note in place of the dropped turns. The
// counts in Note are cumulative over the session; Count, Tokens and the
// range are this eviction's. Nats-Msg-Id is "<session>:evicted:<version>".
type Evicted struct {
	V       int       `json:"v"`
	Session string    `json:"session"`
	Version uint64    `json:"version"` // the summary version this eviction produced
	Count   int       `json:"count"`
	Tokens  int       `json:"tokens"`
	First   time.Time `json:"first_at"`
	Last    time.Time `json:"last_at"`
	// FromTurn..ToTurn (inclusive) are the evicted turns' indexes.
	FromTurn     int64     `json:"from_turn"`
	ToTurn       int64     `json:"to_turn"`
	Cursor       int64     `json:"cursor"`
	TotalEvicted int64     `json:"total_evicted"`
	Note         string    `json:"note"`
	At           time.Time `json:"at"`
}

// Memories is published on fold.out.<session>.memory when a fold returned
// durable facts not published before for the session.
// Nats-Msg-Id is "<session>:memory:<version>".
type Memories struct {
	V        int      `json:"v"`
	Session  string   `json:"session"`
	Version  uint64   `json:"version"` // the summary version of the fold that extracted them
	FoldID   string   `json:"fold_id"`
	Memories []string `json:"memories"`
	// Items, when the backend had them (the offline backend does), are the
	// same memories with their structure, one per text of Memories in the
	// same order. Optional: readers use Items when present, else Memories.
	Items []MemoryItem `json:"items,omitempty"`
	Model string       `json:"model,omitempty"`
	At    time.Time    `json:"at"`
}

// MemoryItem is one memory of Memories.Items: a durable fact, who said it,
// in which turn and when, and the ID of the earlier memory of the session
// it replaces when a later turn changed that fact (a consumer keeps the
// older one as true of its time, and answers with the newer).
type MemoryItem struct {
	ID         string    `json:"id"`
	Speaker    string    `json:"speaker,omitempty"`
	Text       string    `json:"text"`
	TurnID     string    `json:"turn_id,omitempty"`
	At         time.Time `json:"at,omitzero"`
	Supersedes string    `json:"supersedes,omitempty"`
}
