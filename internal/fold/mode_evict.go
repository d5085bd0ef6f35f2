package fold

import (
	"context"
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// ModeEvict drops the oldest turns without a model call; recall
// finds them.
const ModeEvict Mode = "evict"

func init() { register(evictMode{}) }

// EvictPolicy is mode evict's rolling eviction.
type EvictPolicy struct {
	TargetUtilization float64 // evict down to this fraction of the window
	MinKeepMessages   int     // always keep at least this many turns
}

// evictMode is mode evict: no model call; above context_window − reserve,
// drop the oldest turns down to TargetUtilization of the window, keeping
// at least MinKeepMessages. A running note stands for what was dropped.
type evictMode struct{}

func (evictMode) Name() Mode { return ModeEvict }

func (evictMode) Doc() ModeDoc {
	return ModeDoc{Bot: "bots whose model must see exact recent text", Summary: "above context_window − reserve_tokens, drop the oldest turns without a model call; a note and recall stand for them"}
}

func (evictMode) Settings() []string {
	return []string{"context_window", "reserve_tokens", "target_utilization", "min_keep_messages"}
}

// Validate: evicting down to the target must get below the trigger, or
// every turn would evict again.
func (evictMode) Validate(p Policy) error {
	t := p.Tokens
	if target := int(p.Evict.TargetUtilization * float64(t.ContextWindow)); target >= t.Trigger() {
		return fmt.Errorf("target utilization %g: evicting down to %d tokens must land below the trigger at context window − reserve = %d tokens",
			p.Evict.TargetUtilization, target, t.Trigger())
	}
	return nil
}

func (e evictMode) Plan(p Policy, c Check) Decision { return plan(e, ActionEvict, p, c) }

func (evictMode) trigger(p Policy, c Check, d *Decision) bool {
	estimateAndLimit(p, c, d)
	return d.Estimate > d.Limit
}

func (evictMode) keepFrom(p Policy, c Check, d Decision) int64 { return p.evictTo(c, d.Estimate) }

func (evictMode) Summarizes() bool                       { return false }
func (evictMode) TurnTokens(Policy) bool                 { return true }
func (evictMode) Estimates() bool                        { return true }
func (evictMode) Idle(Policy) (time.Duration, int, bool) { return 0, 0, false }
func (evictMode) Placeholder(Policy, Decision) bool      { return false }
func (evictMode) WithoutRecall() Mode                    { return ModeTokens }

// TierEvicted is the tier of an eviction note: no summarizer was called.
const TierEvicted Tier = "evicted"

// Summarize is mode evict's fold: no summarizer call. Its "summary" is the
// eviction note, cumulative over the session (req.Evicted holds the
// evictions before this one), and its outcome carries the evicted event
// that the recorder publishes once the note is stored. Turns need only
// their index, time and tokens (Decision.Model is false: the batch's text
// is not read).
func (e evictMode) Summarize(_ context.Context, _ Summarizer, req Request, _ Policy, _ func(string) int) (Outcome, error) {
	n := len(req.Turns)
	if n == 0 {
		return Outcome{}, fmt.Errorf("mode evict: expected turns to evict, got none")
	}
	toks := 0
	for _, t := range req.Turns {
		toks += t.Tokens
	}
	first, last := req.Turns[0], req.Turns[n-1]
	total := Eviction{Count: req.Evicted.Count + int64(n), Tokens: req.Evicted.Tokens + int64(toks), First: first.At, Last: last.At}
	if req.Evicted.Count > 0 {
		total.First = req.Evicted.First
	}
	note := e.Note(total)
	return Outcome{
		Summary: note, Tier: TierEvicted, Model: "none", Note: true,
		Evicted: &events.Evicted{
			Count: n, Tokens: toks, First: first.At, Last: last.At, FromTurn: first.Index, ToTurn: last.Index,
			Cursor: last.Index + 1, TotalEvicted: total.Count, Note: note,
		},
	}, nil
}

// Note is the eviction note, cumulative over the session.
func (evictMode) Note(e Eviction) string {
	return fmt.Sprintf("[Context rolled: %d messages evicted (%d tokens). Full transcript searchable via recall (fold.svc.recall). Evicted range: %s to %s]",
		e.Count, e.Tokens, e.First.UTC().Format(time.RFC3339), e.Last.UTC().Format(time.RFC3339))
}

// evictTo is the first turn kept in mode evict: drop the oldest turns until
// the estimate is at most TargetUtilization of the window, keeping at least
// MinKeepMessages.
func (p Policy) evictTo(c Check, estimate int) int64 {
	target := int(p.Evict.TargetUtilization * float64(p.Tokens.ContextWindow))
	last := c.Total - int64(p.Evict.MinKeepMessages) // evict below this at most
	to := c.Cursor
	for to < last && estimate > target {
		estimate -= c.turnTokens(int(to - c.Cursor))
		to++
	}
	return to
}
