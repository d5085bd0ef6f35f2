package events

import (
	"fmt"
	"strings"
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
//   - the range (Min..Max), checked by Check on every surface: a
//     configure (SessionConfig.Validate), the processor's flags and
//     configuration, and the policy a session folds with
//     (fold.Policy.Validate);
//   - the processor's flag (Flag) with its default and usage, from which
//     the config file key (the flag's name) and the environment variable
//     (EnvVar) follow (cmd/processor);
//   - the schema's property for Key (schema/v1/control.json) and the
//     settings table of docs/modes.md, written by go generate (gen/);
//   - the modes that read it (Modes) come from the modes' own files
//     (fold.Engine.Settings), its default (Default) from
//     fold.DefaultPolicy, both generated into settings_gen.go;
//   - the processor's flags write the fold.Policy field of Key
//     (fold.Policy.Field), and a configure's value is applied to it
//     (fold.Policy.Apply, in the processor's withOverrides).
//
// A new setting is one entry here, its SessionConfig field, and its
// fold.Policy field (its case in Policy.Field, its default in
// DefaultPolicy); then go generate ./internal/events.
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
}

// Default is the deployment's default, in the setting's unit:
// fold.DefaultPolicy's value of its field (generated, settings_gen.go).
func (s Setting) Default() float64 { return settingDefaults[s.Key] }

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
// (fold.Engine.Settings, generated into settings_gen.go); none: every
// mode.
func (s Setting) Modes() []string { return settingModes[s.Key] }

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

// Check reports v, a value in the setting's unit, outside the declared
// range, as a *ValidationError naming the setting's Key; 0 is not set (the
// deployment's value, a rule or off) unless ZeroIsValue. It is the one
// range check of every surface: a configure (SessionConfig.Validate, which
// names the field config.<key>), the processor's flags, its configuration
// and the policy a session folds with (fold.Policy.Validate).
func (s Setting) Check(v float64) error {
	if v == 0 && !s.ZeroIsValue {
		return nil
	}
	if s.Exclusive {
		if !(v > s.Min && v < s.Max) {
			return invalid(s.Key, "expected a %s between %g and %g (exclusive), got %g", s.Unit, s.Min, s.Max, v)
		}
		return nil
	}
	if v < s.Min || v > s.Max {
		lo := fmt.Sprint(int64(s.Min))
		if s.ZeroIsValue && s.Min == 0 {
			lo = "0 (off)"
		}
		return invalid(s.Key, "expected %s..%d %s, got %g", lo, int64(s.Max), s.Unit, v)
	}
	return nil
}

// check is Check of c's value, if c sets it, naming the field config.<key>.
func (s Setting) check(c *SessionConfig) error {
	v, set := s.value(c)
	if !set {
		return nil
	}
	err := s.Check(v)
	if ve, ok := AsValidation(err); ok {
		ve.Field = "config." + ve.Field
	}
	return err
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

//go:generate go run ./gen -root ../..

// Settings are the numeric per-session settings, in the order of the docs.
var Settings = []Setting{
	{Key: "recent_window", Flag: "recent-window", Unit: Turns, Min: 1, Max: 10000,
		Doc: "turns kept verbatim", value: intVal(func(c *SessionConfig) int { return c.RecentWindow })},
	{Key: "batch_size", Flag: "batch-size", Unit: Turns, Min: 1, Max: 1000,
		Doc: "turns folded per run", value: intVal(func(c *SessionConfig) int { return c.BatchSize })},
	{Key: "max_summary_chars", Flag: "max-summary-chars", Unit: Chars, Min: 100, Max: 100000,
		Doc: "summary budget in characters", value: intVal(func(c *SessionConfig) int { return c.MaxSummaryChars })},
	{Key: "max_note_chars", Flag: "max-note-chars", Unit: Chars, Min: 1, Max: 100000,
		Doc: "cap per screen-watch note when folded", value: intVal(func(c *SessionConfig) int { return c.MaxNoteChars })},
	{Key: "min_fold_tokens", Flag: "min-fold-tokens", Unit: Tokens, Min: 0, Max: MaxMinFoldTokens, ZeroIsValue: true,
		Doc:    "a due fold waits until the turns behind the recent window hold this many tokens, then folds them in one call (fewer, larger summarizer calls; 0 = folds of batch_size turns)",
		Detail: "sizes are the bot's tokens, else chars/4 x 1.2; the fold takes the shortest run from the cursor that holds them, at least batch_size turns, and the verbatim window grows meanwhile",
		value:  ptrVal(func(c *SessionConfig) *int { return c.MinFoldTokens })},
	{Key: "context_window", Flag: "context-window", Unit: Tokens, Min: 1024, Max: MaxTokens,
		Doc: "the bot model's context window in tokens", Detail: "the trigger is context_window - reserve_tokens", value: intVal(func(c *SessionConfig) int { return c.ContextWindow })},
	{Key: "reserve_tokens", Flag: "reserve-tokens", Unit: Tokens, Min: 1, Max: MaxTokens,
		DefaultDoc: "a quarter of the window, at most 16384",
		Doc:        "headroom for the answer: the context must shrink above the context window minus this reserve",
		Detail:     "a session that sets context_window without reserve_tokens gets its own window's default; below context_window when both are set",
		value:      intVal(func(c *SessionConfig) int { return c.ReserveTokens })},
	{Key: "idle_after_seconds", Flag: "idle-after", Unit: Seconds, Min: 1, Max: 30 * 24 * 3600,
		Doc: "a session quiet this long is folded once above the idle threshold (sleep-time compaction; the processor's 0 disables it)", value: intVal(func(c *SessionConfig) int { return c.IdleAfterSeconds })},
	{Key: "idle_threshold", Flag: "idle-threshold", Unit: Fraction, Min: 0, Max: 1, Exclusive: true,
		Doc: "idle fold threshold, a fraction of the context window", Detail: "below emergency_threshold when both are set", value: fracVal(func(c *SessionConfig) float64 { return c.IdleThreshold })},
	{Key: "emergency_threshold", Flag: "emergency-threshold", Unit: Fraction, Min: 0, Max: 1, Exclusive: true,
		Doc: "fold at once above this fraction of the context window", value: fracVal(func(c *SessionConfig) float64 { return c.EmergencyThreshold })},
	{Key: "keep_recent_tokens", Flag: "keep-recent-tokens", Unit: Tokens, Min: 1, Max: MaxTokens,
		DefaultDoc: "20% of the context window",
		Doc:        "the newest turns whose tokens fit this budget stay verbatim", value: intVal(func(c *SessionConfig) int { return c.KeepRecentTokens })},
	{Key: "keep_recent_messages", Flag: "keep-recent-messages", Unit: Turns, Min: 1, Max: 100000,
		Doc: "never keep fewer turns verbatim than this", Detail: "the verbatim tail is the larger of this and keep_recent_tokens' turns", value: intVal(func(c *SessionConfig) int { return c.KeepRecentMessages })},
	{Key: "target_utilization", Flag: "target-utilization", Unit: Fraction, Min: 0, Max: 1, Exclusive: true,
		Doc: "evict down to this fraction of the context window", value: fracVal(func(c *SessionConfig) float64 { return c.TargetUtilization })},
	{Key: "min_keep_messages", Flag: "min-keep-messages", Unit: Turns, Min: 1, Max: 100000,
		Doc: "always keep at least this many turns", value: intVal(func(c *SessionConfig) int { return c.MinKeepMessages })},
	{Key: "interval_exchanges", Flag: "interval-exchanges", Unit: Exchanges, Min: 1, Max: 10000,
		Doc: "fold every this many exchanges (a bot answer completes one)", value: intVal(func(c *SessionConfig) int { return c.IntervalExchanges })},
	{Key: "keep_recent", Flag: "keep-recent", Unit: Turns, Min: 1, Max: 10000,
		Doc: "turns kept verbatim after each fold", value: intVal(func(c *SessionConfig) int { return c.KeepRecent })},
	{Key: "mask_tool_outputs_after_seconds", Flag: "mask-tool-outputs-after", Unit: Seconds, Min: 1, Max: 365 * 24 * 3600,
		DefaultDoc: "off",
		Doc:        "tool turns older than this reach the summarizer as placeholders (observation masking)", value: intVal(func(c *SessionConfig) int { return c.MaskToolOutputsAfterSeconds })},
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
