package fold

import (
	"context"
	"time"
)

// ModeWindow, the default, folds fixed batches behind a
// turn-count window.
const ModeWindow Mode = "window"

func init() { register(windowMode{}) }

// windowMode is mode window: fixed batches behind a turn-count window,
// decided by Window.Evaluate with its own gates (its exact
// turn-count arithmetic).
type windowMode struct{}

func (windowMode) Name() Mode { return ModeWindow }

func (windowMode) Doc() ModeDoc {
	return ModeDoc{Bot: "voice and chat bots with short turns", Summary: "keep recent_window turns verbatim, fold batch_size turns behind them"}
}

func (windowMode) Settings() []string {
	return []string{"recent_window", "batch_size", "min_fold_tokens"}
}

func (windowMode) Validate(Policy) error { return nil }

func (windowMode) Plan(p Policy, c Check) Decision {
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

func (windowMode) Summarizes() bool { return true }

// TurnTokens: min_fold_tokens weighs the eligible turns.
func (windowMode) TurnTokens(p Policy) bool { return p.Window.MinFoldTokens > 0 }

func (windowMode) Estimates() bool                        { return false }
func (windowMode) Idle(Policy) (time.Duration, int, bool) { return 0, 0, false }
func (windowMode) Placeholder(Policy, Decision) bool      { return false }
func (windowMode) Note(Eviction) string                   { return "" }
func (windowMode) WithoutRecall() Mode                    { return "" }

func (windowMode) Summarize(ctx context.Context, s Summarizer, req Request, _ Policy, _ func(string) int) (Outcome, error) {
	return Summarize(ctx, s, req)
}
