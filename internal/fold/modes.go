package fold

import (
	"fmt"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Mode names how a session's old turns leave the verbatim window: the
// modes of one engine, sharing its trigger, state and
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
	CauseWindow    = "window"    // the turn-count threshold
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
	// window (sleep-time compaction); 0 disables.
	IdleAfter     time.Duration
	IdleThreshold float64
	// Above EmergencyThreshold of the window a fold starts at once, even
	// below context_window − reserve_tokens (emergency path):
	// the effective trigger is the lower of the two.
	EmergencyThreshold float64
	// The verbatim tail: the newest turns whose tokens fit KeepRecentTokens
	// (0 = 20% of the window), and never fewer than
	// KeepRecentMessages.
	KeepRecentTokens   int
	KeepRecentMessages int
	// Chunking of the folded turns: ~25% of the window per
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
	// (observation masking); 0 = off.
	MaskToolOutputsAfter time.Duration
}

// DefaultPolicy is mode window with its defaults, and the other
// modes' defaults ready for a per-session switch.
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

// WithDefaults is p with every setting left at 0 (unset) taking its
// default (DefaultPolicy): the mode, the window (all of it when recent
// and batch are both unset), the budgets, the token arithmetic (a reserve
// left at 0 follows the window: ReserveFor), eviction and interval.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.Mode == "" {
		p.Mode = d.Mode
	}
	if p.Window.Recent == 0 && p.Window.Batch == 0 {
		p.Window = d.Window
	}
	setDefault(&p.Window.MaxSummaryChars, d.Window.MaxSummaryChars)
	setDefault(&p.Window.MaxNoteChars, d.Window.MaxNoteChars)
	t, dt := &p.Tokens, d.Tokens
	setDefault(&t.ContextWindow, dt.ContextWindow)
	setDefault(&t.IdleAfter, dt.IdleAfter)
	setDefault(&t.IdleThreshold, dt.IdleThreshold)
	setDefault(&t.EmergencyThreshold, dt.EmergencyThreshold)
	setDefault(&t.KeepRecentMessages, dt.KeepRecentMessages)
	setDefault(&t.ChunkFraction, dt.ChunkFraction)
	setDefault(&t.OversizedFraction, dt.OversizedFraction)
	setDefault(&p.Evict.TargetUtilization, d.Evict.TargetUtilization)
	setDefault(&p.Evict.MinKeepMessages, d.Evict.MinKeepMessages)
	setDefault(&p.Interval.Exchanges, d.Interval.Exchanges)
	setDefault(&p.Interval.KeepRecent, d.Interval.KeepRecent)
	return p
}

// setDefault sets *v to d when it is 0 (unset).
func setDefault[T int | float64 | time.Duration](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}

// Validate reports a policy that cannot work, naming the setting: each
// setting's value against its declared range (events.Setting.Check, the
// check every surface shares), a setting left at 0 that has no meaning
// for 0, and the rules between settings.
func (p Policy) Validate() error {
	t := p.Tokens
	e, ok := engines[p.Mode]
	if !ok {
		return fmt.Errorf("mode: expected one of %s, got %q", strings.Join(ModeNames(), ", "), p.Mode)
	}
	for _, s := range events.Settings {
		if p.Field(s.Key) == nil {
			continue // read from the session's config, not the policy
		}
		v := p.Get(s.Key)
		if err := s.Check(v); err != nil {
			return err
		}
		// 0 is a value where the default is 0 (off, or a rule such as
		// reserve_tokens' quarter of the window) and for a duration (off).
		if v == 0 && !s.ZeroIsValue && s.Default() != 0 && s.Unit != events.Seconds {
			return &events.ValidationError{Code: events.CodeMissingField, Field: s.Key,
				Reason: fmt.Sprintf("required, expected a value (the default is %g), got 0", s.Default())}
		}
	}
	switch {
	case t.Reserve() >= t.ContextWindow:
		return fmt.Errorf("reserve tokens: expected 1..%d (below the context window), or 0 for a quarter of the window up to %d, got %d",
			t.ContextWindow-1, DefaultReserveTokens, t.ReserveTokens)
	case t.IdleAfter > 0 && t.IdleThreshold >= t.EmergencyThreshold:
		return fmt.Errorf("idle threshold: expected a fraction below the emergency threshold %g, got %g", t.EmergencyThreshold, t.IdleThreshold)
	case t.ChunkFraction <= 0 || t.ChunkFraction > 1:
		return fmt.Errorf("chunk fraction: expected (0, 1], got %g", t.ChunkFraction)
	case t.OversizedFraction < t.ChunkFraction || t.OversizedFraction > 1:
		return fmt.Errorf("oversized fraction: expected between the chunk fraction %g and 1, got %g", t.ChunkFraction, t.OversizedFraction)
	}
	return e.Validate(p)
}

// DefaultReserveTokens is the largest default reserve for the answer.
const DefaultReserveTokens = 16384

// ReserveFor is the reserve of a window when none is set for it:
// 16,384 tokens, capped at a quarter of the window, so that a small
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
// the verbatim window now and which turns (the mode's Engine.Plan), and
// how the fold runs (Decision.Model, Decision.Placeholder).
func (p Policy) Plan(c Check) Decision {
	e := p.Engine()
	return p.runs(e, e.Plan(p, c))
}

// PlanEnd is the final fold of an ended session: everything still verbatim
// (turns [cursor, total) and notes pending notes), in a mode that
// summarizes; a mode that evicts has nothing to fold at the end (its note
// stands already). Fold false: nothing to fold, the session is archived.
func (p Policy) PlanEnd(cursor, total int64, notes int) Decision {
	e := p.Engine()
	if !e.Summarizes() || (total <= cursor && notes == 0) {
		return Decision{}
	}
	d := Decision{Fold: true, Action: ActionFold, Cause: CauseEnd, From: cursor, To: total, RecentStart: total, Eligible: total - cursor}
	return p.runs(e, d)
}

// runs fills in how a planned fold runs.
func (p Policy) runs(e Engine, d Decision) Decision {
	if d.Fold {
		d.Model = e.Summarizes()
		d.Placeholder = e.Placeholder(p, d)
	}
	return d
}

// WithRecall is p as a deployment runs it: without recall, a mode that
// needs it (evict) folds in the mode it names instead (Engine.WithoutRecall).
func (p Policy) WithRecall(recall bool) Policy {
	if fb := p.Engine().WithoutRecall(); fb != "" && !recall {
		p.Mode = fb
	}
	return p
}

// NoteMode reports whether a summary-updated of mode carries a note that
// stands for dropped turns (its mode evicts instead of summarizing), not a
// summary of them.
func NoteMode(mode string) bool {
	e, ok := Lookup(Mode(mode))
	return ok && !e.Summarizes()
}

// IdleAt is when a quiet session, last active at last, is due for its idle
// fold (Engine.Idle), if it will be: not before now, and only while its
// context estimate (a function, as it costs a sum) is above the mode's
// idle threshold.
func (p Policy) IdleAt(last, now time.Time, estimate func() int) (time.Time, bool) {
	after, above, ok := p.Engine().Idle(p)
	if !ok || last.IsZero() {
		return time.Time{}, false
	}
	at := last.Add(after)
	if !now.Before(at) {
		return time.Time{}, false // checked already at or after that time
	}
	if estimate() <= above {
		return time.Time{}, false
	}
	return at, true
}

func (c Check) turnTokens(i int) int {
	if c.TurnTokens == nil {
		return 0
	}
	return c.TurnTokens(i)
}

// Field is a pointer to the field of p that a configure key sets (an
// *int, a *float64, or a *time.Duration counted in seconds), nil for a
// key the policy does not hold. The keys are those of events.Settings,
// which a test walks.
func (p *Policy) Field(key string) any {
	switch key {
	case "recent_window":
		return &p.Window.Recent
	case "batch_size":
		return &p.Window.Batch
	case "max_summary_chars":
		return &p.Window.MaxSummaryChars
	case "max_note_chars":
		return &p.Window.MaxNoteChars
	case "min_fold_tokens":
		return &p.Window.MinFoldTokens
	case "context_window":
		return &p.Tokens.ContextWindow
	case "reserve_tokens":
		return &p.Tokens.ReserveTokens
	case "idle_after_seconds":
		return &p.Tokens.IdleAfter
	case "idle_threshold":
		return &p.Tokens.IdleThreshold
	case "emergency_threshold":
		return &p.Tokens.EmergencyThreshold
	case "keep_recent_tokens":
		return &p.Tokens.KeepRecentTokens
	case "keep_recent_messages":
		return &p.Tokens.KeepRecentMessages
	case "target_utilization":
		return &p.Evict.TargetUtilization
	case "min_keep_messages":
		return &p.Evict.MinKeepMessages
	case "interval_exchanges":
		return &p.Interval.Exchanges
	case "keep_recent":
		return &p.Interval.KeepRecent
	case "mask_tool_outputs_after_seconds":
		return &p.MaskToolOutputsAfter
	}
	return nil
}

// Apply sets the field of key to v (a duration's v in seconds); false
// for a key the policy does not hold.
func (p *Policy) Apply(key string, v float64) bool {
	switch f := p.Field(key).(type) {
	case *int:
		*f = int(v)
	case *float64:
		*f = v
	case *time.Duration:
		*f = time.Duration(v * float64(time.Second))
	default:
		return false
	}
	return true
}

// Get is the value of key's field (a duration in seconds, 0 when it is
// negative: off); 0 for a key the policy does not hold.
func (p Policy) Get(key string) float64 {
	switch f := p.Field(key).(type) {
	case *int:
		return float64(*f)
	case *float64:
		return *f
	case *time.Duration:
		return max(0, f.Seconds()) // a negative duration is off, as 0
	}
	return 0
}
