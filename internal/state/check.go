package state

import (
	"time"

	"github.com/foldstream/foldstream/internal/fold"
)

// Check describes the session to its mode's plan (fold.Policy.Plan) at
// now: the shared gates, and what the mode reads besides (each turn's
// tokens, the context estimate, whether it has been quiet long enough),
// asked of the mode's engine so that a mode that reads nothing costs
// nothing. unfolded is the unfolded turns' tokens (TokenSum), called only
// when the mode estimates. force is a manual compact.
func (s *Session) Check(pol fold.Policy, now time.Time, force bool, unfolded func() int) fold.Check {
	c := fold.Check{
		Cursor: s.Cursor, Total: s.Total, InFlight: s.Lease.Held(now),
		Backoff: now.Before(s.RetryAfter), Ending: s.Ended, Disabled: s.Config != nil && s.Config.Disabled != nil && *s.Config.Disabled,
		Force: force, Exchanges: s.Exchanges - s.ExchangesFolded,
	}
	eng := pol.Engine()
	if eng.TurnTokens(pol) {
		// Sizes as applied: the bot's tokens, else chars/4×1.2 (Apply).
		turns := s.Turns
		c.TurnTokens = func(i int) int { return turns[i].Tokens }
	}
	if s.Tools != nil {
		// No fold ends inside a tool exchange (fold.ToolExchange).
		cursor := s.Cursor
		c.Joined = func(i int) bool { return s.Joined(cursor + int64(i)) }
	}
	if eng.Estimates() {
		c.UnfoldedTokens = unfolded()
		c.SummaryTokens = s.SummaryToks
		c.ReportedContext = s.ContextTokens
	}
	if after, _, ok := eng.Idle(pol); ok {
		c.Idle = !s.LastActivity.IsZero() && now.Sub(s.LastActivity) >= after
	}
	return c
}

// IdleAt is when the quiet session is due for its mode's idle fold
// (fold.Policy.IdleAt), if it will be; never once it has ended. unfolded
// is as for Check.
func (s *Session) IdleAt(pol fold.Policy, now time.Time, unfolded func() int) (time.Time, bool) {
	if s.Ended {
		return time.Time{}, false
	}
	return pol.IdleAt(s.LastActivity, now, func() int { return max(s.SummaryToks+unfolded(), s.ContextTokens) })
}

// TokenSum memoizes a session's unfolded turns' tokens for the modes that
// estimate the context, which need them on every turn (the trigger check
// and the idle wake): a window of 128k tokens holds thousands of unfolded
// turns, and summing them all twice per turn would make a long session's
// ingest quadratic. The sum covers s.Turns[:n] while the head is unchanged
// (same cursor, epoch and first turn); turns appended since are added,
// anything else recounts.
type TokenSum struct {
	cursor int64
	epoch  uint32
	first  uint64 // sequence of s.Turns[0]
	n, sum int
}

// Of is the tokens of s's unfolded turns.
func (m *TokenSum) Of(s *Session) int {
	if m.n > len(s.Turns) || m.cursor != s.Cursor || m.epoch != s.Epoch || (m.n > 0 && s.Turns[0].Seq != m.first) {
		*m = TokenSum{cursor: s.Cursor, epoch: s.Epoch}
	}
	for _, t := range s.Turns[m.n:] {
		m.sum += t.Tokens
	}
	m.n = len(s.Turns)
	if m.n > 0 {
		m.first = s.Turns[0].Seq
	}
	return m.sum
}
