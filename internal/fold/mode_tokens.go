package fold

// tokensRule is mode tokens (seeds 003 and 004): fold when the context
// estimate passes the lower of context_window − reserve and the emergency
// fraction (or the idle fraction for a quiet session), keeping a
// token-budgeted tail.
type tokensRule struct{}

func (tokensRule) Trigger(p Policy, c Check, d *Decision) bool {
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

func (tokensRule) KeepFrom(p Policy, c Check, _ Decision) int64 { return c.Total - p.keepTail(c) }
func (tokensRule) Action() Action                               { return ActionFold }
func (tokensRule) Summarizes() bool                             { return true }
func (tokensRule) CountsTokens() bool                           { return true }

// estimateAndLimit is the token modes' shared arithmetic (seed 004's two
// signals, the better one winning) against context_window − reserve.
func estimateAndLimit(p Policy, c Check, d *Decision) {
	d.Estimate = max(c.SummaryTokens+c.UnfoldedTokens, c.ReportedContext)
	d.Limit = p.Tokens.Trigger()
	d.Cause = CauseThreshold
}

// keepTail is the number of newest unfolded turns kept verbatim in mode
// tokens: those whose tokens fit the keep budget, and never fewer than
// KeepRecentMessages (seed 003: the larger of the two).
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
