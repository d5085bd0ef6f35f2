package events

import (
	"fmt"

	"github.com/foldstream/foldstream/internal/fold"
	"strconv"
	"strings"
	"time"
)

// Unit is what a setting's number counts.
type Unit string

const (
	Turns     Unit = "turns"
	Tokens    Unit = "tokens"
	Chars     Unit = "characters"
	Fraction  Unit = "fraction of the context window"
	Seconds   Unit = "seconds"
	Minutes   Unit = "minutes"
	Hour      Unit = "hour (UTC)"
	Exchanges Unit = "exchanges"
)

// Setting is one numeric per-session setting of the modes, declared once.
// Everything else is derived from the declaration, and a test walks every
// setting and checks each surface:
//   - configure validation: SessionConfig.Validate checks Min..Max here;
//   - the processor's flag (Flag) with its default and usage, from which
//     the config file key (the flag's name) and the environment variable
//     (EnvVar) follow (cmd/processor);
//   - the schema's property for Key (schema/v1/control.json) and the
//     settings table of docs/modes.md (DocsTable), written by go generate
//     (generate.go);
//   - the modes that read it (Modes) come from the modes' own files
//     (fold.Engine.Settings);
//   - the processor's flags write the setting's fold.Policy field, and a
//     configure's value is applied to it (processor's withOverrides),
//     both through the declaration (Apply); its default is
//     fold.DefaultPolicy's value of that field (Default).
//
// A new setting is one entry here (naming its fold.Policy field), that
// field (with its default in fold.DefaultPolicy) and its SessionConfig
// field.
type Setting struct {
	Key  string // the JSON key in a configure's config
	Flag string // the processor flag of the deployment's value; "" if none
	Unit Unit
	// Min..Max is the range a configure accepts. 0 means not set (the
	// deployment's value) unless ZeroIsValue.
	Min, Max    float64
	ZeroIsValue bool
	// Exclusive: a fraction strictly between Min and Max.
	Exclusive bool
	// DefaultDoc, when set, is how the docs state a default that is a
	// rule (Default is fold.DefaultPolicy's value of the field).
	DefaultDoc string
	Doc        string
	// Detail is what the schema's description adds to Doc: rules
	// between fields, which a JSON Schema range cannot state.
	Detail string
	value  func(*SessionConfig) (v float64, set bool)
	// field is the setting's fold.Policy field (an *int, a *float64, or
	// for Seconds a *time.Duration); nil for a setting the fold policy
	// does not hold (the reset policy's, read from the session's config).
	field func(*fold.Policy) any
}

// Field is a pointer to the setting's field of p (*int, *float64 or
// *time.Duration), nil for a setting the fold policy does not hold.
func (s Setting) Field(p *fold.Policy) any {
	if s.field == nil {
		return nil
	}
	return s.field(p)
}

// Apply sets the setting's field of p to v, in the setting's unit (a
// Seconds setting's v in seconds).
func (s Setting) Apply(p *fold.Policy, v float64) {
	switch f := s.Field(p).(type) {
	case *int:
		*f = int(v)
	case *float64:
		*f = v
	case *time.Duration:
		*f = time.Duration(v * float64(time.Second))
	}
}

// Get is the setting's value in p, in its unit; 0 for a setting the fold
// policy does not hold.
func (s Setting) Get(p fold.Policy) float64 {
	switch f := s.Field(&p).(type) {
	case *int:
		return float64(*f)
	case *float64:
		return *f
	case *time.Duration:
		return f.Seconds()
	}
	return 0
}

// Default is the deployment's default: fold.DefaultPolicy's value of the
// field, in the setting's unit.
func (s Setting) Default() float64 { return s.Get(fold.DefaultPolicy()) }

// at is a field accessor of Setting.
func at[T int | float64 | time.Duration](f func(*fold.Policy) *T) func(*fold.Policy) any {
	return func(p *fold.Policy) any { return f(p) }
}

// EnvVar is the environment variable that sets the setting's flag.
func (s Setting) EnvVar() string {
	if s.Flag == "" {
		return ""
	}
	return "FOLDSTREAM_" + strings.ToUpper(strings.ReplaceAll(s.Flag, "-", "_"))
}

// Value is the setting's value in c, and whether c sets it.
func (s Setting) Value(c *SessionConfig) (float64, bool) { return s.value(c) }

// Modes are the modes that read the setting, as each mode's file declares
// (fold.Engine.Settings); none: every mode.
func (s Setting) Modes() []string { return fold.ModesReading(s.Key) }

// Usage is the flag's help text: the doc, the modes that read it, and
// what a flag of 0 means when the default is a rule.
func (s Setting) Usage() string {
	u := s.Doc
	if s.Default() == 0 && s.DefaultDoc != "" {
		u += " (0: " + s.DefaultDoc + ")"
	}
	if modes := s.Modes(); len(modes) > 0 {
		u = "mode " + strings.Join(modes, ", ") + ": " + u
	}
	return u
}

// check reports a value out of the setting's range, naming the field.
func (s Setting) check(c *SessionConfig) error {
	v, set := s.value(c)
	if !set || v == 0 && !s.ZeroIsValue {
		return nil
	}
	field := "config." + s.Key
	if s.Exclusive {
		if !(v > s.Min && v < s.Max) {
			return invalid(field, "expected a %s between %g and %g (exclusive), got %g", s.Unit, s.Min, s.Max, v)
		}
		return nil
	}
	if v < s.Min || v > s.Max || v != float64(int64(v)) {
		lo := fmt.Sprint(int64(s.Min))
		if s.ZeroIsValue && s.Min == 0 {
			lo = "0 (off)"
		}
		return invalid(field, "expected %s..%d %s, got %g", lo, int64(s.Max), s.Unit, v)
	}
	return nil
}

func intVal(f func(*SessionConfig) int) func(*SessionConfig) (float64, bool) {
	return func(c *SessionConfig) (float64, bool) { v := f(c); return float64(v), v != 0 }
}

func ptrVal(f func(*SessionConfig) *int) func(*SessionConfig) (float64, bool) {
	return func(c *SessionConfig) (float64, bool) {
		if p := f(c); p != nil {
			return float64(*p), true
		}
		return 0, false
	}
}

func fracVal(f func(*SessionConfig) float64) func(*SessionConfig) (float64, bool) {
	return func(c *SessionConfig) (float64, bool) { v := f(c); return v, v != 0 }
}

// Settings are the numeric per-session settings, in the order of the docs.
var Settings = []Setting{
	{Key: "recent_window", Flag: "recent-window", Unit: Turns, Min: 1, Max: 10000,
		Doc: "turns kept verbatim (seed 000)", value: intVal(func(c *SessionConfig) int { return c.RecentWindow }),
		field: at(func(p *fold.Policy) *int { return &p.Window.Recent })},
	{Key: "batch_size", Flag: "batch-size", Unit: Turns, Min: 1, Max: 1000,
		Doc: "turns folded per run", value: intVal(func(c *SessionConfig) int { return c.BatchSize }),
		field: at(func(p *fold.Policy) *int { return &p.Window.Batch })},
	{Key: "max_summary_chars", Flag: "max-summary-chars", Unit: Chars, Min: 100, Max: 100000,
		Doc: "summary budget in characters", value: intVal(func(c *SessionConfig) int { return c.MaxSummaryChars }),
		field: at(func(p *fold.Policy) *int { return &p.Window.MaxSummaryChars })},
	{Key: "max_note_chars", Flag: "max-note-chars", Unit: Chars, Min: 1, Max: 100000,
		Doc: "cap per screen-watch note when folded", value: intVal(func(c *SessionConfig) int { return c.MaxNoteChars }),
		field: at(func(p *fold.Policy) *int { return &p.Window.MaxNoteChars })},
	{Key: "min_fold_tokens", Flag: "min-fold-tokens", Unit: Tokens, Min: 0, Max: MaxMinFoldTokens, ZeroIsValue: true,
		Doc:    "a due fold waits until the turns behind the recent window hold this many tokens, then folds them in one call (fewer, larger summarizer calls; 0 = seed 000's fixed batches)",
		Detail: "sizes are the bot's tokens, else chars/4 x 1.2; the fold takes the shortest run from the cursor that holds them, at least batch_size turns, and the verbatim window grows meanwhile",
		value:  ptrVal(func(c *SessionConfig) *int { return c.MinFoldTokens }),
		field:  at(func(p *fold.Policy) *int { return &p.Window.MinFoldTokens })},
	{Key: "context_window", Flag: "context-window", Unit: Tokens, Min: 1024, Max: MaxTokens,
		Doc: "the bot model's context window in tokens", Detail: "the trigger is context_window - reserve_tokens", value: intVal(func(c *SessionConfig) int { return c.ContextWindow }),
		field: at(func(p *fold.Policy) *int { return &p.Tokens.ContextWindow })},
	{Key: "reserve_tokens", Flag: "reserve-tokens", Unit: Tokens, Min: 1, Max: MaxTokens,
		DefaultDoc: "a quarter of the window, at most 16384",
		Doc:        "headroom for the answer: the context must shrink above the context window minus this reserve",
		Detail:     "a session that sets context_window without reserve_tokens gets its own window's default; below context_window when both are set",
		value:      intVal(func(c *SessionConfig) int { return c.ReserveTokens }),
		field:      at(func(p *fold.Policy) *int { return &p.Tokens.ReserveTokens })},
	{Key: "idle_after_seconds", Flag: "idle-after", Unit: Seconds, Min: 1, Max: 30 * 24 * 3600,
		Doc: "a session quiet this long is folded once above the idle threshold (sleep-time compaction; the processor's 0 disables it)", value: intVal(func(c *SessionConfig) int { return c.IdleAfterSeconds }),
		field: at(func(p *fold.Policy) *time.Duration { return &p.Tokens.IdleAfter })},
	{Key: "idle_threshold", Flag: "idle-threshold", Unit: Fraction, Min: 0, Max: 1, Exclusive: true,
		Doc: "idle fold threshold, a fraction of the context window", Detail: "below emergency_threshold when both are set", value: fracVal(func(c *SessionConfig) float64 { return c.IdleThreshold }),
		field: at(func(p *fold.Policy) *float64 { return &p.Tokens.IdleThreshold })},
	{Key: "emergency_threshold", Flag: "emergency-threshold", Unit: Fraction, Min: 0, Max: 1, Exclusive: true,
		Doc: "fold at once above this fraction of the context window", value: fracVal(func(c *SessionConfig) float64 { return c.EmergencyThreshold }),
		field: at(func(p *fold.Policy) *float64 { return &p.Tokens.EmergencyThreshold })},
	{Key: "keep_recent_tokens", Flag: "keep-recent-tokens", Unit: Tokens, Min: 1, Max: MaxTokens,
		DefaultDoc: "20% of the context window",
		Doc:        "the newest turns whose tokens fit this budget stay verbatim", value: intVal(func(c *SessionConfig) int { return c.KeepRecentTokens }),
		field: at(func(p *fold.Policy) *int { return &p.Tokens.KeepRecentTokens })},
	{Key: "keep_recent_messages", Flag: "keep-recent-messages", Unit: Turns, Min: 1, Max: 100000,
		Doc: "never keep fewer turns verbatim than this", Detail: "the verbatim tail is the larger of this and keep_recent_tokens' turns", value: intVal(func(c *SessionConfig) int { return c.KeepRecentMessages }),
		field: at(func(p *fold.Policy) *int { return &p.Tokens.KeepRecentMessages })},
	{Key: "target_utilization", Flag: "target-utilization", Unit: Fraction, Min: 0, Max: 1, Exclusive: true,
		Doc: "evict down to this fraction of the context window", value: fracVal(func(c *SessionConfig) float64 { return c.TargetUtilization }),
		field: at(func(p *fold.Policy) *float64 { return &p.Evict.TargetUtilization })},
	{Key: "min_keep_messages", Flag: "min-keep-messages", Unit: Turns, Min: 1, Max: 100000,
		Doc: "always keep at least this many turns", value: intVal(func(c *SessionConfig) int { return c.MinKeepMessages }),
		field: at(func(p *fold.Policy) *int { return &p.Evict.MinKeepMessages })},
	{Key: "interval_exchanges", Flag: "interval-exchanges", Unit: Exchanges, Min: 1, Max: 10000,
		Doc: "fold every this many exchanges (a bot answer completes one)", value: intVal(func(c *SessionConfig) int { return c.IntervalExchanges }),
		field: at(func(p *fold.Policy) *int { return &p.Interval.Exchanges })},
	{Key: "keep_recent", Flag: "keep-recent", Unit: Turns, Min: 1, Max: 10000,
		Doc: "turns kept verbatim after each fold", value: intVal(func(c *SessionConfig) int { return c.KeepRecent }),
		field: at(func(p *fold.Policy) *int { return &p.Interval.KeepRecent })},
	{Key: "mask_tool_outputs_after_seconds", Flag: "mask-tool-outputs-after", Unit: Seconds, Min: 1, Max: 365 * 24 * 3600,
		DefaultDoc: "off",
		Doc:        "tool turns older than this reach the summarizer as placeholders (seed 003's observation masking)", value: intVal(func(c *SessionConfig) int { return c.MaskToolOutputsAfterSeconds }),
		field: at(func(p *fold.Policy) *time.Duration { return &p.MaskToolOutputsAfter })},
	{Key: "reset_idle_minutes", Unit: Minutes, Min: 1, Max: 365 * 24 * 60, DefaultDoc: "none (manual resets)",
		Doc: "reset_policy idle: minutes of silence after which the session starts a new life", Detail: "required (not 0) with reset_policy idle", value: intVal(func(c *SessionConfig) int { return c.ResetIdleMinutes })},
	{Key: "reset_hour", Unit: Hour, Min: 0, Max: 23, ZeroIsValue: true, DefaultDoc: "none (manual resets)",
		Doc: "reset_policy daily: the hour at which the session starts a new life", Detail: "required with reset_policy daily (0 is midnight)", value: ptrVal(func(c *SessionConfig) *int { return c.ResetHour })},
}

// SettingByKey is the declaration of a configure key; ok false if none.
func SettingByKey(key string) (Setting, bool) {
	for _, s := range Settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// DocsTable is the settings table of docs/modes.md, derived from Settings.
func DocsTable() string {
	var b strings.Builder
	b.WriteString("| `configure` key | flag (config file key) | environment | modes | default | range |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, s := range Settings {
		flag, env := "—", "—"
		if s.Flag != "" {
			flag, env = "`--"+s.Flag+"`", "`"+s.EnvVar()+"`"
		}
		modes := "all"
		if m := s.Modes(); len(m) > 0 {
			modes = strings.Join(m, ", ")
		}
		def := s.DefaultDoc
		if def == "" {
			def = num(s.Default())
			if s.Unit == Seconds {
				def = (time.Duration(s.Default()) * time.Second).String()
			}
		}
		rng := fmt.Sprintf("%s..%s %s", num(s.Min), num(s.Max), s.Unit)
		if s.Exclusive {
			rng = fmt.Sprintf("(%s, %s) %s", num(s.Min), num(s.Max), s.Unit)
		}
		switch {
		case s.ZeroIsValue:
		case s.Flag != "":
			rng += "; 0 keeps the deployment's"
		default:
			rng += "; 0 = not set" // no deployment value to keep
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", s.Key, flag, env, modes, def, rng)
	}
	return b.String()
}

// num prints a declared number as written: 10000000, not 1e+07.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
