package fold

import (
	"context"
	"slices"
	"sort"
	"time"
)

// Engine is one mode, complete: its plan and every hook the processor
// calls instead of comparing mode names. Each mode is one file
// (mode_<name>.go) holding its Engine, its name, its docs row and the
// settings it reads, and registering itself (register); nothing else in
// the repository lists the modes. docs/modes.md shows a worked example.
type Engine interface {
	// Name is the mode's name on the wire (configure's mode, --mode).
	Name() Mode
	// Doc is the mode's row of the docs' modes table.
	Doc() ModeDoc
	// Settings are the configure keys (events.Settings) the mode reads
	// besides those every mode reads (a key no mode lists is read by
	// every mode).
	Settings() []string
	// Validate reports what only this mode cannot work with, naming the
	// setting; Policy.Validate checks the shared settings first.
	Validate(p Policy) error
	// Plan decides, for the session described by c, whether anything
	// leaves the verbatim window now and which turns.
	Plan(p Policy, c Check) Decision
	// Summarizes reports whether the mode calls a summarizer; one that
	// does not evicts (its plans' Action is ActionEvict).
	Summarizes() bool
	// TurnTokens reports whether Plan needs each turn's tokens
	// (Check.TurnTokens), Estimates whether it needs the session's token
	// estimate (Check's SummaryTokens, UnfoldedTokens, ReportedContext
	// and Idle).
	TurnTokens(p Policy) bool
	Estimates() bool
	// Idle is when a quiet session is due for a fold of its own: quiet
	// for after, with an estimate above tokens. ok false: never.
	Idle(p Policy) (after time.Duration, tokens int, ok bool)
	// Placeholder reports whether a fold planned as d may land with seed
	// 004's placeholder instead of a summary when the summarizer cannot
	// serve it (its breaker is open, or it failed twice in a row).
	Placeholder(p Policy, d Decision) bool
	// Summarize is one fold's outcome for req: the summarizer call(s) of
	// a mode that summarizes (with req.Sources' answers merged, where the
	// mode asks them), the note of one that evicts.
	Summarize(ctx context.Context, s Summarizer, req Request, p Policy, count func(string) int) (Outcome, error)
	// Note is the running note that stands for the turns a mode that
	// evicts has dropped so far ("" for a mode that summarizes).
	Note(e Eviction) string
	// WithoutRecall is the mode a deployment without recall runs instead
	// of this one, because the mode drops turns only recall can find
	// again; "" when the mode works without recall.
	WithoutRecall() Mode
}

// ModeDoc is a mode's row of the docs' modes table.
type ModeDoc struct {
	Bot     string // the typical bot that picks it, a few words
	Summary string // what it does, one sentence
}

// Eviction is what an eviction note reports: the session's evictions so
// far, the one being recorded included.
type Eviction struct {
	Count, Tokens int64
	First, Last   time.Time // the first and last evicted turn's time
}

// engines are the registered modes, by name. Each mode file registers its
// engine at init; the set is fixed from then on, so it is not state a
// processor could change.
var engines = map[Mode]Engine{}

// register adds a mode; a second mode of the same name is a programming
// error.
func register(e Engine) {
	if _, dup := engines[e.Name()]; dup {
		panic("fold: mode " + string(e.Name()) + " registered twice")
	}
	engines[e.Name()] = e
}

// Lookup is the engine of mode m; ok false for a mode nobody registered.
func Lookup(m Mode) (Engine, bool) {
	e, ok := engines[m]
	return e, ok
}

// Engines are the registered modes: the default first, then by name, the
// order of the docs.
func Engines() []Engine {
	out := make([]Engine, 0, len(engines))
	for _, e := range engines {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Name() == DefaultMode) != (b.Name() == DefaultMode) {
			return a.Name() == DefaultMode
		}
		return a.Name() < b.Name()
	})
	return out
}

// ModeNames are the registered modes' names, in Engines' order.
func ModeNames() []string {
	var out []string
	for _, e := range Engines() {
		out = append(out, string(e.Name()))
	}
	return out
}

// ModesReading are the modes that list key among their settings, in
// Engines' order; none means every mode reads it.
func ModesReading(key string) []string {
	var out []string
	for _, e := range Engines() {
		if slices.Contains(e.Settings(), key) {
			out = append(out, string(e.Name()))
		}
	}
	return out
}

// threshold is the part of a mode that plan puts the shared gates around.
type threshold interface {
	// trigger fills d's Cause, and in the token modes its Estimate and
	// Limit, and reports whether the session is over its threshold now.
	// d.RecentStart starts at the cursor; a mode may move it.
	trigger(p Policy, c Check, d *Decision) bool
	// keepFrom is the first turn kept verbatim when a fold goes ahead:
	// [c.Cursor, keepFrom) leaves the window (before tool exchanges at the
	// boundary are kept whole).
	keepFrom(p Policy, c Check, d Decision) int64
}

// plan is a threshold mode's Plan: every such mode shares window mode's
// gates (disabled, ending, a fold in flight, a failure backoff) and
// reports skips with the same reasons; what leaves the window leaves by
// action.
func plan(r threshold, action Action, p Policy, c Check) Decision {
	d := Decision{RecentStart: c.Cursor}
	over := r.trigger(p, c, &d)
	if c.Force {
		over = true
		d.Cause = CauseForced
	}
	switch {
	case c.Disabled:
		d.Reason = SkipDisabled
		return d
	case c.Ending:
		d.Reason = SkipSessionEnding
		return d
	case !over:
		d.Reason = SkipBelowThreshold
		return d
	case c.InFlight:
		d.Reason = SkipAlreadyInFlight
		return d
	case c.Backoff && !c.Force:
		d.Reason = SkipRetryBackoff
		return d
	}
	to := r.keepFrom(p, c, d)
	// These modes end the fold where the kept tail starts, so a tool
	// exchange at the boundary stays verbatim whole (the fold shrinks).
	to = c.pairedEnd(c.Cursor, max(c.Cursor, to), max(c.Cursor, to))
	d.RecentStart = max(c.Cursor, to)
	d.Eligible = d.RecentStart - c.Cursor
	if d.Eligible <= 0 {
		d.Reason = SkipNoEligibleBatch
		return d
	}
	d.Fold = true
	d.Action = action
	d.From, d.To = c.Cursor, d.RecentStart
	return d
}
