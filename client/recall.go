package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// EndpointRecall answers a RecallRequest with a Recall: the turns of a
// session that best match a query (seed 001: evicted turns stay
// searchable).
const EndpointRecall = "recall"

// Recall scopes: which turns a recall searches.
const (
	// RecallScopeEvicted searches the turns before the session's cursor:
	// folded into the summary (mode window) or dropped (mode evict), in
	// either case no longer verbatim in the bot's prompt. The default.
	RecallScopeEvicted = "evicted"
	// RecallScopeAll searches every turn since the session's last reset.
	RecallScopeAll = "all"
)

// Recall limits: a request without a limit gets DefaultRecallLimit
// results at most; a limit must be within 1..MaxRecallLimit.
const (
	DefaultRecallLimit = 10
	MaxRecallLimit     = 50
	// MaxRecallQueryChars bounds a query, in characters (runes).
	MaxRecallQueryChars = 1024
)

// RecallRequest asks for the turns of Session that best match Query.
type RecallRequest struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	Query   string `json:"query"`
	// Limit is the most results wanted, 1..MaxRecallLimit; 0 (omitted)
	// means DefaultRecallLimit.
	Limit int `json:"limit,omitempty"`
	// Scope is RecallScopeEvicted (the default when empty) or
	// RecallScopeAll.
	Scope string `json:"scope,omitempty"`
}

// RecallOptions are the optional parts of a recall: zero values mean
// DefaultRecallLimit and RecallScopeEvicted.
type RecallOptions struct {
	Limit int
	Scope string
}

// Recall is the reply of the recall endpoint.
type Recall struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	Query   string `json:"query"`
	// Scope is the scope that was searched (the default filled in).
	Scope string `json:"scope"`
	// Cursor is the session's first unfolded turn when the request was
	// answered: scope evicted searches the turns with Index < Cursor.
	Cursor int64 `json:"cursor"`
	// Results are best first: highest score, ties broken by recency
	// (higher index first). Never null.
	Results []RecallResult `json:"results"`
	// Searched is how many distinct turns were in scope and scored.
	Searched int `json:"searched"`
}

// RecallResult is one matching turn.
type RecallResult struct {
	TurnID string `json:"turn_id"`
	// Index is the turn's position in the session's transcript as the
	// processor counts it (0-based, duplicates not counted, restarted by
	// a reset): the index cursors and summaries refer to.
	Index   int64     `json:"index"`
	At      time.Time `json:"at"`
	Speaker string    `json:"speaker"`
	Role    string    `json:"role"`
	Text    string    `json:"text"`
	// Score is the turn's BM25 relevance to the query (higher is better;
	// comparable only within one reply).
	Score float64 `json:"score"`
}

// CheckRecall validates a recall request the way the service does and
// fills in its defaults (V, Limit, Scope). A problem is an error that
// names the field.
func CheckRecall(r *RecallRequest) error {
	if r.V == 0 {
		r.V = WireVersion
	}
	if r.V != WireVersion {
		return fmt.Errorf("field \"v\": expected %d, got %d", WireVersion, r.V)
	}
	if err := events.CheckSession("session", r.Session); err != nil {
		return err
	}
	if strings.TrimSpace(r.Query) == "" {
		return fmt.Errorf("field \"query\": expected a non-empty query, got %q", r.Query)
	}
	if n := len([]rune(r.Query)); n > MaxRecallQueryChars {
		return fmt.Errorf("field \"query\": expected at most %d characters, got %d", MaxRecallQueryChars, n)
	}
	switch {
	case r.Limit == 0:
		r.Limit = DefaultRecallLimit
	case r.Limit < 1 || r.Limit > MaxRecallLimit:
		return fmt.Errorf("field \"limit\": expected 1..%d (omit it for %d), got %d", MaxRecallLimit, DefaultRecallLimit, r.Limit)
	}
	switch r.Scope {
	case "":
		r.Scope = RecallScopeEvicted
	case RecallScopeEvicted, RecallScopeAll:
	default:
		return fmt.Errorf("field \"scope\": expected %q or %q, got %q", RecallScopeEvicted, RecallScopeAll, r.Scope)
	}
	return nil
}

// Recall asks the service for the turns of session that best match query,
// best first. By default it searches the turns before the cursor (folded
// or evicted, no longer verbatim in the prompt); opts.Scope RecallScopeAll
// searches every turn since the last reset. A request the service would
// refuse is an error naming the field and nothing is sent; an unknown
// session is a *ServiceError for which IsUnknownSession holds.
func (b *Builder) Recall(ctx context.Context, session, query string, opts RecallOptions) (*Recall, error) {
	req := RecallRequest{V: WireVersion, Session: session, Query: query, Limit: opts.Limit, Scope: opts.Scope}
	if err := CheckRecall(&req); err != nil {
		return nil, fmt.Errorf("foldstream client: recall: %w", err)
	}
	var out Recall
	if err := b.request(ctx, EndpointRecall, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
