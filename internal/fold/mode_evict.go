package fold

// evictRule is mode evict (seed 001): no model call; above context_window
// − reserve, drop the oldest turns down to TargetUtilization of the
// window, keeping at least MinKeepMessages.
type evictRule struct{}

func (evictRule) Trigger(p Policy, c Check, d *Decision) bool {
	estimateAndLimit(p, c, d)
	return d.Estimate > d.Limit
}

func (evictRule) KeepFrom(p Policy, c Check, d Decision) int64 { return p.evictTo(c, d.Estimate) }
func (evictRule) Action() Action                               { return ActionEvict }
func (evictRule) Summarizes() bool                             { return false }
func (evictRule) CountsTokens() bool                           { return true }

// evictTo is the first turn kept in mode evict: drop the oldest turns until
// the estimate is at most TargetUtilization of the window, keeping at least
// MinKeepMessages (seed 001).
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
