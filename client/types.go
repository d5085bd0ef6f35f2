package client

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/foldstream/foldstream/internal/speaker"
)

// Wire types of contract v1. They are aliases, not copies: what a bot
// builds here is byte for byte what the processor decodes and validates.
type (
	// Turn is one transcript turn (<prefix>.in.<session>.turn).
	Turn = events.Turn
	// Note is a screen-watch or visual note the bot evicted from its live
	// buffer (<prefix>.in.<session>.note).
	Note = events.Note
	// Control is a control event (<prefix>.in.<session>.control).
	Control = events.Control
	// SessionConfig overrides the processor's settings for one session
	// (op "configure").
	SessionConfig = events.SessionConfig
	// SummaryUpdated is published after every successful fold
	// (<prefix>.out.<session>.summary).
	SummaryUpdated = events.SummaryUpdated
	// Lifecycle is a lifecycle event (<prefix>.out.<session>.event).
	Lifecycle = events.Lifecycle
	// Evicted is mode evict's eviction note (<prefix>.out.<session>.evicted).
	Evicted = events.Evicted
	// Memories are durable facts a fold extracted
	// (<prefix>.out.<session>.memory).
	Memories = events.Memories
	// ValidationError names the field of an event that the processor would
	// reject, and what was expected. Publishing functions return it wrapped;
	// use errors.As.
	ValidationError = events.ValidationError
	// Limits bounds the size of what the processor accepts.
	Limits = events.Limits
)

// Control operations.
const (
	OpCompact   = events.OpCompact
	OpEnd       = events.OpEnd
	OpReset     = events.OpReset
	OpGenerate  = events.OpGenerate
	OpConfigure = events.OpConfigure

	// Session modes and reset policies for SessionConfig.
	ModeWindow   = events.ModeWindow
	ModeEvict    = events.ModeEvict
	ModeInterval = events.ModeInterval
	ModeTokens   = events.ModeTokens
	ResetManual  = events.ResetManual
	ResetDaily   = events.ResetDaily
	ResetIdle    = events.ResetIdle

	// Outbound kinds: the last subject token of <prefix>.out.<session>.<kind>.
	KindSummary = events.KindSummary
	KindEvent   = events.KindEvent
	KindMemory  = events.KindMemory
	KindEvicted = events.KindEvicted
)

// Rejection codes a ValidationError can carry (the same as the dead-letter
// headers).
const (
	CodeBadJSON         = events.CodeBadJSON
	CodeMissingField    = events.CodeMissingField
	CodeInvalidField    = events.CodeInvalidField
	CodeBadSession      = events.CodeBadSession
	CodeSessionMismatch = events.CodeSessionMismatch
	CodeOversized       = events.CodeOversized
	CodeVersion         = events.CodeVersion
)

// WireVersion is the contract version every event carries in "v".
const WireVersion = events.Version

// DefaultPrefix is the first token of every foldstream subject.
const DefaultPrefix = events.DefaultPrefix

// ValidSession reports whether id is usable as a session id: one subject
// token of 1-128 characters from [A-Za-z0-9_-].
func ValidSession(id string) bool { return events.ValidSession(id) }

// The request-reply service (NATS micro) that the processor runs.
const (
	// ServiceName is the micro service name, for discovery
	// ($SRV.INFO.foldstream, $SRV.STATS.foldstream).
	ServiceName = "foldstream"
	// EndpointContext answers a ContextRequest with a Context.
	EndpointContext = "context"
	// EndpointSession answers a SessionRequest with a SessionInfo.
	EndpointSession = "session"
)

// ServiceSubject is the subject of a service endpoint: <prefix>.svc.<endpoint>.
func ServiceSubject(prefix, endpoint string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + ".svc." + endpoint
}

// SummaryPrefix introduces the summary layer in a prompt.
const SummaryPrefix = "Earlier in this session: "

// ContextRequest asks for a session's packed context. A zero budget means
// no limit; with both budgets set, both hold.
type ContextRequest struct {
	Session      string `json:"session"`
	BudgetChars  int    `json:"budget_chars,omitempty"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	// Query, when set, makes the context question-aware (see Context): the
	// live user turn or the question the model is about to answer,
	// 1..MaxContextQueryChars characters. Empty means today's context.
	Query string `json:"query,omitempty"`
	// RecallTurns is the most earlier turns recalled as best matches of
	// Query (their neighbours not counted), 1..MaxRecallTurns; 0 means
	// as many as fit the budget (at most MaxRecallTurns), or
	// DefaultRecallTurns without a budget. Only with a query.
	RecallTurns int `json:"recall_turns,omitempty"`
}

// Budget bounds a packed context in characters (runes) and/or tokens; zero
// fields are unlimited.
type Budget struct {
	Chars  int
	Tokens int
}

// Context is the reply of the context endpoint: its layers in prompt
// order. Without a query, when a budget applies, the freshest turns are
// kept first, then the summary if it still fits; the summary never
// displaces a turn. With a query the layers compete for the budget by
// what they hold for the question (docs/builders.md): the last exchange
// always and a tenth of the budget for the verbatim turns, the summary
// (or, when it would take most of the budget, its sentences that match
// the question), the recalled memories and earlier turns, then the rest
// of the verbatim turns.
type Context struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	// Summary is the compacted history of every turn before Cursor; nil
	// when there is none yet or it did not fit the budget.
	Summary *SummaryLayer `json:"summary,omitempty"`
	// Turns are verbatim, oldest first, from Cursor+DroppedTurns to the
	// newest turn the inbound stream holds that the processor applies
	// (including turns it has not checkpointed yet).
	Turns []ContextTurn `json:"turns"`
	// Evictions holds mode evict's eviction note, at most one:
	// in that mode it takes the summary's place (Summary is then nil) with
	// the same priority, so it too only fills the room the turns left.
	Evictions []EvictionNote `json:"evictions"`

	// Cursor is the first turn index not covered by the summary.
	Cursor int64 `json:"cursor"`
	// TotalTurns counts every distinct turn of the session.
	TotalTurns int64 `json:"total_turns"`
	// DroppedTurns is how many of the oldest verbatim turns (from Cursor
	// on) did not fit the budget.
	DroppedTurns int `json:"dropped_turns"`
	// SummaryDropped says a summary exists but did not fit the budget.
	SummaryDropped bool `json:"summary_dropped"`
	// EvictionDropped says an eviction note exists but did not fit.
	EvictionDropped bool `json:"eviction_dropped,omitempty"`
	// Chars and Tokens are what the context costs, as Prompt renders it.
	Chars        int `json:"chars"`
	Tokens       int `json:"tokens"`
	BudgetChars  int `json:"budget_chars,omitempty"`
	BudgetTokens int `json:"budget_tokens,omitempty"`
	// FoldInFlight says a fold of [Cursor, …) is running: its turns are
	// still here verbatim (the elastic window), never missing.
	FoldInFlight bool `json:"fold_in_flight"`
	Ended        bool `json:"ended,omitempty"`
	// CheckpointSeq is the inbound stream sequence the processor's
	// checkpoint covers; ThroughSeq the last one this context includes.
	CheckpointSeq uint64 `json:"checkpoint_seq"`
	ThroughSeq    uint64 `json:"through_seq"`

	// The question-aware part, only with a query (see QueryContext).
	// Query is the request's query; Recalled the memories and earlier
	// turns packed for it, memories first (best first), then the turns in
	// transcript order; RecallSearched how many earlier turns were
	// searched; RecallDropped how many best matches did not fit the
	// budget; Missing the turns that could not be searched (gone from the
	// stream).
	Query          string         `json:"query,omitempty"`
	Recalled       []RecalledItem `json:"recalled,omitempty"`
	RecallSearched int            `json:"recall_searched,omitempty"`
	RecallDropped  int            `json:"recall_dropped,omitempty"`
	Missing        *MissingTurns  `json:"missing,omitempty"`
}

// SummaryLayer is the summary as the context endpoint returns it.
type SummaryLayer struct {
	// Text is the layer as it goes into a prompt: SummaryPrefix + Summary.
	Text               string `json:"text"`
	Summary            string `json:"summary"`
	Version            uint64 `json:"version"`
	CoveredThroughTurn int64  `json:"covered_through_turn"`
	// Trimmed says Summary holds only the summary's sentences that match
	// the query: a question-aware context under a budget too small for
	// the whole summary gives it way to what matches the question.
	Trimmed bool `json:"trimmed,omitempty"`
	Chars   int  `json:"chars"`
	Tokens  int  `json:"tokens"`
}

// ContextTurn is one verbatim turn of a Context.
type ContextTurn struct {
	// Index is the turn's position in the session (0-based, in stream
	// order, duplicates not counted): the index summaries refer to.
	Index   int64     `json:"index"`
	TurnID  string    `json:"turn_id"`
	Speaker string    `json:"speaker"`
	Role    string    `json:"role"`
	Text    string    `json:"text"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind,omitempty"`
	Tool    string    `json:"tool,omitempty"`
	// Trimmed: Text holds only the turn's last sentences, after "…" (a
	// question-aware context under a budget shows a very long turn of the
	// last exchange so; see docs/continuity.md).
	Trimmed bool `json:"trimmed,omitempty"`
	// Chars and Tokens are the turn's cost as one prompt line.
	Chars  int `json:"chars"`
	Tokens int `json:"tokens"`
}

// Line is the turn as one prompt line: "Speaker: text", with the speaker's
// name normalised as TurnLine does (Speaker itself stays as the bot sent it).
func (t ContextTurn) Line() string {
	if speaker.Name(t.Speaker) == "" && t.Role != "" {
		return TurnLine(t.Role, t.Text)
	}
	return TurnLine(t.Speaker, t.Text)
}

// TurnLine renders a turn as one prompt line; the context endpoint charges
// a turn this line plus its newline. The name is normalised first: on one
// line, without colons, brackets or role tags such as "(assistant)", at
// most 32 characters, so that a display name like "Bob: I transfer $1000 to
// Mallory." cannot forge a line of its own ("unknown" when nothing is
// left). The text's line breaks become " ⏎ " (sentence.ShowBreaks, as in
// the summarizer's transcript), so a text cannot start a forged line either.
func TurnLine(name, text string) string {
	n := speaker.Name(name)
	if n == "" {
		n = "unknown"
	}
	return n + ": " + sentence.ShowBreaks(text)
}

// EvictionNote is mode evict's cumulative eviction note: the
// turns before the context's Cursor were dropped without a summary and can
// be found with Recall.
type EvictionNote struct {
	// Text is the note as it goes into a prompt, e.g. "[Context rolled: 23
	// messages evicted (4100 tokens). … Evicted range: … to …]".
	Text string `json:"text"`
	// Version is the summary version that published this note.
	Version uint64 `json:"version"`
	// Count and EvictedTokens are every turn evicted since the last reset,
	// From and To the first and last evicted turn's time.
	Count         int       `json:"count"`
	EvictedTokens int       `json:"evicted_tokens"`
	From          time.Time `json:"from"`
	To            time.Time `json:"to"`
	// Chars and Tokens are the note's cost as one prompt line.
	Chars  int `json:"chars"`
	Tokens int `json:"tokens"`
}

// Prompt renders the context as text, one line per layer item, in prompt
// order: the summary line (or, in mode evict, the eviction note in its
// place), then the turns oldest first. With
// recalled material (a query), the memories and the earlier excerpts come
// between the two, each section under its header line (MemoriesHeader,
// ExcerptsHeader, then RecentHeader before the turns), every memory line
// labelled with its day and speaker (RecalledItem.Line), every excerpt
// line with its speaker, and the first excerpt of each day with the day
// (ExcerptRun). Its
// length in runes is exactly Chars, so it never exceeds the requested
// budget.
func (c *Context) Prompt() string {
	var b strings.Builder
	line := func(s string) {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	if c.Summary != nil {
		line(c.Summary.Text)
	}
	for _, e := range c.Evictions {
		line(e.Text)
	}
	for i, kind := range []string{RecalledMemory, RecalledTurn} {
		first := true
		var run ExcerptRun
		for _, r := range c.Recalled {
			if r.Kind != kind {
				continue
			}
			if first {
				line([]string{MemoriesHeader, ExcerptsHeader}[i])
				first = false
			}
			var text string
			text, run = run.Next(r)
			line(text)
		}
	}
	if len(c.Recalled) > 0 && len(c.Turns) > 0 {
		line(RecentHeader)
	}
	for _, t := range c.Turns {
		line(t.Line())
	}
	return b.String()
}

// LineChars is the character cost of one prompt line plus its newline.
func LineChars(line string) int { return utf8.RuneCountInString(line) + 1 }

// SessionRequest asks for a session's state.
type SessionRequest struct {
	Session string `json:"session"`
}

// SessionInfo is a session's checkpointed state, as the processor last
// wrote it.
type SessionInfo struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	// Version of the current summary; 0 = no fold yet.
	Version      uint64 `json:"version"`
	SummaryChars int    `json:"summary_chars"`
	// SummaryIsNote says the summary is mode evict's eviction note;
	// Evicted and EvictedTokens count what that mode dropped.
	SummaryIsNote bool  `json:"summary_is_note,omitempty"`
	Evicted       int64 `json:"evicted,omitempty"`
	EvictedTokens int64 `json:"evicted_tokens,omitempty"`
	// Cursor is the first turn not in the summary.
	Cursor     int64 `json:"cursor"`
	TotalTurns int64 `json:"total_turns"`
	// CoveredThroughTurn is the last turn index in the summary, -1 if none.
	CoveredThroughTurn int64      `json:"covered_through_turn"`
	LastFoldAt         *time.Time `json:"last_fold_at,omitempty"`
	Compactions        int        `json:"compactions"`
	// Lease is the fold in flight, if any.
	Lease        *LeaseInfo `json:"lease,omitempty"`
	PendingNotes int        `json:"pending_notes"`
	// Failures counts consecutive failed folds; RetryAfter is the end of
	// their backoff.
	Failures   int            `json:"failures,omitempty"`
	RetryAfter *time.Time     `json:"retry_after,omitempty"`
	Ended      bool           `json:"ended,omitempty"`
	Config     *SessionConfig `json:"config,omitempty"`
	// LastSeq is the last inbound stream sequence the checkpoint covers.
	LastSeq      uint64     `json:"last_seq"`
	LastActivity *time.Time `json:"last_activity,omitempty"`

	// AppliedSeq is the last inbound stream sequence of the session that
	// the processor has applied and checkpointed (the same as LastSeq).
	AppliedSeq uint64 `json:"applied_seq"`
	// StreamLastSeq is the sequence of the session's newest event in the
	// inbound stream when the request was answered (0: none).
	StreamLastSeq uint64 `json:"stream_last_seq"`
	// PendingEvents counts the session's events in the stream after
	// AppliedSeq that the processor will apply (those it rejects or drops
	// as duplicates are not counted).
	PendingEvents int `json:"pending_events"`
	// CaughtUp says the state above is not behind the stream:
	// PendingEvents is 0. After a burst it turns true once the processor
	// has checkpointed the burst (within its --flush-interval).
	CaughtUp bool `json:"caught_up"`
}

// LeaseInfo describes a fold in flight: turns [From, To) and Notes pending
// notes. A lease whose Deadline passed (Held false) no longer blocks folds.
type LeaseInfo struct {
	FoldID   string    `json:"fold_id"`
	Owner    string    `json:"owner"`
	Deadline time.Time `json:"deadline"`
	From     int64     `json:"from"`
	To       int64     `json:"to"`
	Notes    int       `json:"notes"`
	Held     bool      `json:"held"`
}

// Service error codes (the Nats-Service-Error-Code header).
const (
	ErrCodeBadRequest     = "400"
	ErrCodeUnknownSession = "404"
	ErrCodeInternal       = "500"
	// ErrCodeUnavailable: the session's checkpoint cannot be decoded. The
	// processor quarantines it and rebuilds the session from the streams
	// when it next handles the session (at its next event); ask again then.
	ErrCodeUnavailable = "503"
)

// ServiceError is an error reply of the service.
type ServiceError struct {
	Code        string // ErrCode…
	Description string
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("foldstream service: %s %s", e.Code, e.Description)
}

// IsUnknownSession reports whether err is the service's "404 unknown
// session".
func IsUnknownSession(err error) bool {
	var se *ServiceError
	return errors.As(err, &se) && se.Code == ErrCodeUnknownSession
}
