package fold

import (
	"context"
	"time"

	"github.com/foldstream/foldstream/internal/contextsource"
)

// ModeInterval folds every N exchanges, merging context sources.
const ModeInterval Mode = "interval"

func init() { register(intervalMode{}) }

// IntervalPolicy is mode interval's continuous compaction.
type IntervalPolicy struct {
	Exchanges  int // fold every this many exchanges (assistant turns)
	KeepRecent int // turns kept verbatim after each fold
}

// intervalMode is mode interval: every Interval.Exchanges exchanges, fold
// everything but the last Interval.KeepRecent turns, and merge the context
// sources' answers for the folded window into the summary.
type intervalMode struct{}

func (intervalMode) Name() Mode { return ModeInterval }

func (intervalMode) Doc() ModeDoc {
	return ModeDoc{Bot: "assistants refreshing situational awareness", Summary: "every interval_exchanges exchanges fold all but keep_recent turns, with the context sources' answers for the folded window"}
}

func (intervalMode) Settings() []string { return []string{"interval_exchanges", "keep_recent"} }

func (intervalMode) Validate(Policy) error { return nil }

func (m intervalMode) Plan(p Policy, c Check) Decision { return plan(m, ActionFold, p, c) }

func (intervalMode) trigger(p Policy, c Check, d *Decision) bool {
	d.Cause = CauseInterval
	keep := int64(p.Interval.KeepRecent)
	d.RecentStart = max(c.Cursor, c.Total-keep)
	return c.Exchanges >= p.Interval.Exchanges && c.Total-c.Cursor > keep
}

func (intervalMode) keepFrom(_ Policy, _ Check, d Decision) int64 { return d.RecentStart }

func (intervalMode) Summarizes() bool                       { return true }
func (intervalMode) TurnTokens(Policy) bool                 { return false }
func (intervalMode) Estimates() bool                        { return false }
func (intervalMode) Idle(Policy) (time.Duration, int, bool) { return 0, 0, false }
func (intervalMode) Placeholder(Policy, Decision) bool      { return false }
func (intervalMode) Note(Eviction) string                   { return "" }
func (intervalMode) WithoutRecall() Mode                    { return "" }

// Summarize condenses only the conversation part of the running block;
// the context sources are asked afresh for the folded window
// (req.Sources) and their lines merged into the block after.
func (intervalMode) Summarize(ctx context.Context, s Summarizer, req Request, _ Policy, _ func(string) int) (Outcome, error) {
	b, _ := contextsource.SplitBlock(req.PreviousSummary)
	req.PreviousSummary = b.Conversation
	var answers []contextsource.Answer
	if req.Sources != nil {
		answers = req.Sources(ctx, req.From, req.To)
	}
	out, err := Summarize(ctx, s, req)
	if err != nil {
		return out, err
	}
	out.Summary = contextsource.Block(req.From, req.To, out.Summary, answers, req.MaxChars+sourceAllowance(len(answers)))
	return out, nil
}

// sourceAllowance is the room context-source lines get on top of the
// conversation summary's budget.
func sourceAllowance(sources int) int {
	if sources == 0 {
		return 80 // the header line
	}
	return 80 + sources*(contextsource.MaxAnswerChars/2)
}
