package fold

// intervalRule is mode interval (seed 002): every Interval.Exchanges
// exchanges, fold everything but the last Interval.KeepRecent turns.
type intervalRule struct{}

func (intervalRule) Trigger(p Policy, c Check, d *Decision) bool {
	d.Cause = CauseInterval
	keep := int64(p.Interval.KeepRecent)
	d.RecentStart = max(c.Cursor, c.Total-keep)
	return c.Exchanges >= p.Interval.Exchanges && c.Total-c.Cursor > keep
}

func (intervalRule) KeepFrom(_ Policy, _ Check, d Decision) int64 { return d.RecentStart }
func (intervalRule) Action() Action                               { return ActionFold }
func (intervalRule) Summarizes() bool                             { return true }
func (intervalRule) CountsTokens() bool                           { return false }
