package fold

// windowRule is mode window (seed 000, the default): fixed batches behind
// a turn-count window, decided by Window.Evaluate with its own gates.
type windowRule struct{}

func (windowRule) Plan(p Policy, c Check) Decision {
	d := p.Window.Evaluate(c)
	if d.Fold {
		d.Action = ActionFold
		d.Cause = CauseWindow
		if c.Force {
			d.Cause = CauseForced
		}
	}
	return d
}

// Trigger and KeepFrom are Plan's (planner): not called.
func (windowRule) Trigger(Policy, Check, *Decision) bool        { return false }
func (windowRule) KeepFrom(_ Policy, c Check, _ Decision) int64 { return c.Cursor }
func (windowRule) Action() Action                               { return ActionFold }
func (windowRule) Summarizes() bool                             { return true }
func (windowRule) CountsTokens() bool                           { return false }
