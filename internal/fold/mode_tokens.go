package fold

import (
	"context"
	"time"
)

// ModeTokens folds by token thresholds, in chunks, with three
// tiers.
const ModeTokens Mode = "tokens"

func init() { register(tokensMode{}) }

// tokensMode is mode tokens: fold when the context estimate passes the
// lower of context_window − reserve and the emergency fraction (or the
// idle fraction for a quiet session), keeping a token-budgeted tail, in
// chunks.
type tokensMode struct{}

func (tokensMode) Name() Mode { return ModeTokens }

func (tokensMode) Doc() ModeDoc {
	return ModeDoc{Bot: "coding agents, tool-heavy sessions", Summary: "fold above the lower of context_window − reserve_tokens and the emergency fraction (or the idle fraction when quiet), in chunks, keeping a token-budgeted tail"}
}

func (tokensMode) Settings() []string {
	return []string{"context_window", "reserve_tokens", "idle_after_seconds", "idle_threshold", "emergency_threshold",
		"keep_recent_tokens", "keep_recent_messages"}
}

func (tokensMode) Validate(Policy) error { return nil }

func (m tokensMode) Plan(p Policy, c Check) Decision { return plan(m, ActionFold, p, c) }

func (tokensMode) trigger(p Policy, c Check, d *Decision) bool {
	t := p.Tokens
	estimateAndLimit(p, c, d)
	if e := t.Emergency(); e < d.Limit {
		d.Limit, d.Cause = e, CauseEmergency
	}
	if c.Idle && t.IdleAfter > 0 && d.Estimate > t.Idle() && d.Estimate <= d.Limit {
		d.Limit, d.Cause = t.Idle(), CauseIdle
	}
	return d.Estimate > d.Limit
}

func (tokensMode) keepFrom(p Policy, c Check, _ Decision) int64 { return c.Total - p.keepTail(c) }

func (tokensMode) Summarizes() bool       { return true }
func (tokensMode) TurnTokens(Policy) bool { return true }
func (tokensMode) Estimates() bool        { return true }

// Idle: the sleep-time compaction.
func (tokensMode) Idle(p Policy) (time.Duration, int, bool) {
	t := p.Tokens
	return t.IdleAfter, t.Idle(), t.IdleAfter > 0
}

// Placeholder: the third tier, for a session past its emergency
// threshold, whose context must not overflow while the model cannot fold.
func (tokensMode) Placeholder(_ Policy, d Decision) bool { return d.Cause == CauseEmergency }

func (tokensMode) Note(Eviction) string { return "" }
func (tokensMode) WithoutRecall() Mode  { return "" }

// Summarize folds in chunks of about ChunkFraction of the window,
// skipping oversized ones.
func (tokensMode) Summarize(ctx context.Context, s Summarizer, req Request, p Policy, count func(string) int) (Outcome, error) {
	return SummarizeChunked(ctx, s, req, ChunkOptions{
		ChunkTokens: p.Tokens.ChunkTokens(), OversizedTokens: p.Tokens.OversizedTokens(), Count: count,
	})
}

// estimateAndLimit is the token modes' shared arithmetic (two
// signals, the larger one winning) against context_window − reserve.
func estimateAndLimit(p Policy, c Check, d *Decision) {
	d.Estimate = max(c.SummaryTokens+c.UnfoldedTokens, c.ReportedContext)
	d.Limit = p.Tokens.Trigger()
	d.Cause = CauseThreshold
}

// keepTail is the number of newest unfolded turns kept verbatim in mode
// tokens: those whose tokens fit the keep budget, and never fewer than
// KeepRecentMessages (the larger of the two).
func (p Policy) keepTail(c Check) int64 {
	n := c.Total - c.Cursor
	budget := p.Tokens.keepTokens()
	var kept int64
	for i := n - 1; i >= 0; i-- {
		budget -= c.turnTokens(int(i))
		if budget < 0 {
			break
		}
		kept++
	}
	return min(n, max(kept, int64(p.Tokens.KeepRecentMessages)))
}
