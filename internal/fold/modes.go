package fold

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Mode names how a session's old turns leave the verbatim window: the
// five seeds as modes of one engine, sharing its trigger, state and
// events. What a mode does is its Engine (Lookup).
type Mode string

// DefaultMode is the mode of a deployment that names none. Each mode's
// name is declared in its file (ModeWindow in mode_window.go, …).
const DefaultMode = ModeWindow

// Action is what a plan asks the engine to do.
type Action int

// Actions.
const (
	ActionNone  Action = iota
	ActionFold         // summarize [From, To) into the running summary
	ActionEvict        // drop [From, To) without a model call (mode evict)
)

// Causes say which rule fired, for logs and lifecycle events.
const (
	CauseWindow    = "window"    // seed 000's turn-count threshold
	CauseInterval  = "interval"  // N exchanges since the last fold
	CauseThreshold = "threshold" // estimate above context_window − reserve_tokens
	CauseEmergency = "emergency" // estimate above the emergency fraction
	CauseIdle      = "idle"      // a quiet session above the idle fraction
	CauseForced    = "forced"    // a manual compact
	CauseEnd       = "end"       // the final fold of an ended session
)

// TokenPolicy is the token arithmetic of modes tokens and evict.
type TokenPolicy struct {
	ContextWindow int // the bot model's context window in tokens
	// ReserveTokens is the headroom for the answer: the trigger is at
	// ContextWindow − Reserve(). 0 is not set: ReserveFor the window.
	ReserveTokens int
	// A session quiet for IdleAfter folds once above IdleThreshold of the
	// window (seed 003's sleep-time compaction); 0 disables.
	IdleAfter     time.Duration
	IdleThreshold float64
	// Above EmergencyThreshold of the window a fold starts at once, even
	// below context_window − reserve_tokens (seed 003's emergency path):
	// the effective trigger is the lower of the two.
	EmergencyThreshold float64
	// The verbatim tail: the newest turns whose tokens fit KeepRecentTokens
	// (0 = 20% of the window, seed 003), and never fewer than
	// KeepRecentMessages.
	KeepRecentTokens   int
	KeepRecentMessages int
	// Chunking of the folded turns (seed 004): ~25% of the window per
	// summarizer call; a chunk above OversizedFraction is skipped with a note.
	ChunkFraction     float64
	OversizedFraction float64
}

// Policy is a session's complete compaction setting.
type Policy struct {
	Mode     Mode
	Window   Window // recent/batch for mode window; the summary and note budgets for every summarizing mode
	Tokens   TokenPolicy
	Evict    EvictPolicy
	Interval IntervalPolicy
	// MaskToolOutputsAfter masks tool results older than this before a fold
	// (seed 003's observation masking); 0 = off.
	MaskToolOutputsAfter time.Duration
}

// DefaultPolicy is mode window with seed 000's numbers, and the other
// modes' seed defaults ready for a per-session switch.
func DefaultPolicy() Policy {
	return Policy{
		Mode:   DefaultMode,
		Window: DefaultWindow(),
		Tokens: TokenPolicy{
			ContextWindow: 128000, // ReserveTokens 0: ReserveFor the window, 16,384 here
			IdleAfter:     5 * time.Minute, IdleThreshold: 0.6, EmergencyThreshold: 0.8,
			KeepRecentMessages: 10, ChunkFraction: 0.25, OversizedFraction: 0.5,
		},
		Evict:    EvictPolicy{TargetUtilization: 0.8, MinKeepMessages: 10},
		Interval: IntervalPolicy{Exchanges: 5, KeepRecent: 6},
	}
}

// Validate reports a policy that cannot work, naming the setting.
func (p Policy) Validate() error {
	t := p.Tokens
	e, ok := engines[p.Mode]
	if !ok {
		return fmt.Errorf("mode: expected one of %s, got %q", strings.Join(ModeNames(), ", "), p.Mode)
	}
	switch {
	case t.ContextWindow < 1024:
		return fmt.Errorf("context window: expected at least 1024 tokens, got %d", t.ContextWindow)
	case t.ReserveTokens < 0 || t.Reserve() >= t.ContextWindow:
		return fmt.Errorf("reserve tokens: expected 1..%d (below the context window), or 0 for a quarter of the window up to %d, got %d",
			t.ContextWindow-1, DefaultReserveTokens, t.ReserveTokens)
	case t.EmergencyThreshold <= 0 || t.EmergencyThreshold >= 1:
		return fmt.Errorf("emergency threshold: expected a fraction between 0 and 1, got %g", t.EmergencyThreshold)
	case t.IdleAfter > 0 && (t.IdleThreshold <= 0 || t.IdleThreshold >= t.EmergencyThreshold):
		return fmt.Errorf("idle threshold: expected a fraction above 0 and below the emergency threshold %g, got %g", t.EmergencyThreshold, t.IdleThreshold)
	case t.ChunkFraction <= 0 || t.ChunkFraction > 1:
		return fmt.Errorf("chunk fraction: expected (0, 1], got %g", t.ChunkFraction)
	case t.OversizedFraction < t.ChunkFraction || t.OversizedFraction > 1:
		return fmt.Errorf("oversized fraction: expected between the chunk fraction %g and 1, got %g", t.ChunkFraction, t.OversizedFraction)
	case p.Evict.TargetUtilization <= 0 || p.Evict.TargetUtilization >= 1:
		return fmt.Errorf("target utilization: expected a fraction between 0 and 1, got %g", p.Evict.TargetUtilization)
	case p.Evict.MinKeepMessages < 1:
		return fmt.Errorf("min keep messages: expected at least 1, got %d", p.Evict.MinKeepMessages)
	case p.Interval.Exchanges < 1:
		return fmt.Errorf("interval exchanges: expected at least 1, got %d", p.Interval.Exchanges)
	case p.Interval.KeepRecent < 0:
		return fmt.Errorf("keep recent: expected at least 0, got %d", p.Interval.KeepRecent)
	case p.Window.MinFoldTokens < 0:
		return fmt.Errorf("min fold tokens: expected 0 (off) or more, got %d", p.Window.MinFoldTokens)
	case p.MaskToolOutputsAfter < 0:
		return fmt.Errorf("mask tool outputs after: expected a non-negative duration, got %s", p.MaskToolOutputsAfter)
	}
	return e.Validate(p)
}

// DefaultReserveTokens is seed 004's reserve for the answer.
const DefaultReserveTokens = 16384

// ReserveFor is the reserve of a window when none is set for it: seed
// 004's 16,384 tokens, capped at a quarter of the window, so that a small
// model's window keeps room for its context (8,000 → 2,000; 32,000 →
// 8,000; from 65,536 up, 16,384). docs/modes.md states the rule.
func ReserveFor(window int) int { return min(DefaultReserveTokens, window/4) }

// Reserve is the reserve in force: ReserveTokens, or ReserveFor the
// window when it is 0 (not set).
func (t TokenPolicy) Reserve() int {
	if t.ReserveTokens > 0 {
		return t.ReserveTokens
	}
	return ReserveFor(t.ContextWindow)
}

// Trigger is the token count above which the context must shrink.
func (t TokenPolicy) Trigger() int { return t.ContextWindow - t.Reserve() }

// Emergency is the token count above which mode tokens folds at once.
func (t TokenPolicy) Emergency() int { return int(t.EmergencyThreshold * float64(t.ContextWindow)) }

// Idle is the token count above which a quiet session is folded.
func (t TokenPolicy) Idle() int { return int(t.IdleThreshold * float64(t.ContextWindow)) }

// ChunkTokens is the size of one summarizer call's share of old turns.
func (t TokenPolicy) ChunkTokens() int { return max(1, int(t.ChunkFraction*float64(t.ContextWindow))) }

// OversizedTokens is the chunk size above which a chunk is skipped.
func (t TokenPolicy) OversizedTokens() int {
	return max(1, int(t.OversizedFraction*float64(t.ContextWindow)))
}

// keepTokens is the verbatim tail's token budget.
func (t TokenPolicy) keepTokens() int {
	if t.KeepRecentTokens > 0 {
		return t.KeepRecentTokens
	}
	return t.ContextWindow / 5
}

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
	// Sources reports whether a fold asks the deployment's context
	// sources for the folded window and merges their answers into the
	// summary (seed 002); the model then condenses only the conversation.
	Sources() bool
	// Summarize is one fold's summarizer call(s) for req.
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
	Seed    string // the seed document(s) it implements, e.g. "001"; "" for none
	Summary string // what it does, one sentence
}

// Seeds names the seed document(s), "seed 001" or "seeds 003/004"; ""
// for none.
func (d ModeDoc) Seeds() string {
	switch {
	case d.Seed == "":
		return ""
	case strings.Contains(d.Seed, "/"):
		return "seeds " + d.Seed
	}
	return "seed " + d.Seed
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

// Engines are the registered modes: the default first, then by seed and
// name, the order of the docs.
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
		if sa, sb := a.Doc().Seed, b.Doc().Seed; sa != sb {
			return sa != "" && (sb == "" || sa < sb)
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

// Engine is p's mode's engine; an unset or unknown mode is the default's
// (Validate refuses an unknown one).
func (p Policy) Engine() Engine {
	if e, ok := engines[p.Mode]; ok {
		return e
	}
	return engines[DefaultMode]
}

// Summarizes reports whether the mode calls a summarizer.
func (p Policy) Summarizes() bool { return p.Engine().Summarizes() }

// Plan decides, for the session described by c, whether anything leaves
// the verbatim window now and which turns (the mode's Engine.Plan).
func (p Policy) Plan(c Check) Decision { return p.Engine().Plan(p, c) }

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

// plan is a threshold mode's Plan: every such mode shares the gates of
// seed 000 (disabled, ending, a fold in flight, a failure backoff) and
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

func (c Check) turnTokens(i int) int {
	if c.TurnTokens == nil {
		return 0
	}
	return c.TurnTokens(i)
}
