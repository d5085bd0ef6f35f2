package fold

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

func uniform(tokens int) func(int) int { return func(int) int { return tokens } }

func TestPlanModes(t *testing.T) {
	small := DefaultPolicy()
	small.Tokens = TokenPolicy{
		ContextWindow: 10000, ReserveTokens: 1000, IdleAfter: time.Minute, IdleThreshold: 0.5,
		EmergencyThreshold: 0.8, KeepRecentTokens: 2000, KeepRecentMessages: 4, ChunkFraction: 0.25, OversizedFraction: 0.5,
	}
	small.Evict = EvictPolicy{TargetUtilization: 0.7, MinKeepMessages: 10}
	with := func(m Mode) Policy { p := small; p.Mode = m; return p }

	tests := []struct {
		name     string
		p        Policy
		c        Check
		action   Action
		cause    string
		reason   SkipReason
		from, to int64
	}{
		{name: "window at 61", p: with(ModeWindow), c: Check{Total: 61},
			action: ActionFold, cause: CauseWindow, from: 0, to: 10},
		{name: "window below threshold at 60", p: with(ModeWindow), c: Check{Total: 60}, reason: SkipBelowThreshold},

		{name: "interval waits for N exchanges", p: with(ModeInterval), c: Check{Total: 9, Exchanges: 4}, reason: SkipBelowThreshold},
		{name: "interval folds all but keep_recent", p: with(ModeInterval), c: Check{Total: 10, Exchanges: 5},
			action: ActionFold, cause: CauseInterval, from: 0, to: 4},
		{name: "interval after a fold", p: with(ModeInterval), c: Check{Cursor: 4, Total: 20, Exchanges: 5},
			action: ActionFold, cause: CauseInterval, from: 4, to: 14},
		{name: "interval needs more than keep_recent", p: with(ModeInterval), c: Check{Cursor: 4, Total: 10, Exchanges: 9}, reason: SkipBelowThreshold},

		// 100 turns × 100 tokens = 10000 > emergency 8000: keep 2000 tokens = 20 turns.
		{name: "tokens over the emergency fraction", p: with(ModeTokens), c: Check{Total: 100, UnfoldedTokens: 10000, TurnTokens: uniform(100)},
			action: ActionFold, cause: CauseEmergency, from: 0, to: 80},
		{name: "tokens below every threshold", p: with(ModeTokens), c: Check{Total: 70, UnfoldedTokens: 7000, TurnTokens: uniform(100)}, reason: SkipBelowThreshold},
		{name: "tokens idle threshold on a quiet session", p: with(ModeTokens), c: Check{Total: 60, UnfoldedTokens: 6000, TurnTokens: uniform(100), Idle: true},
			action: ActionFold, cause: CauseIdle, from: 0, to: 40},
		{name: "tokens idle but below the idle fraction", p: with(ModeTokens), c: Check{Total: 40, UnfoldedTokens: 4000, TurnTokens: uniform(100), Idle: true}, reason: SkipBelowThreshold},
		{name: "tokens provider-reported context counts", p: with(ModeTokens), c: Check{Total: 30, UnfoldedTokens: 3000, ReportedContext: 9000, TurnTokens: uniform(100)},
			action: ActionFold, cause: CauseEmergency, from: 0, to: 10},
		{name: "tokens keeps at least N messages", p: with(ModeTokens), c: Check{Total: 4, UnfoldedTokens: 9000, TurnTokens: uniform(2250)},
			reason: SkipNoEligibleBatch},
		{name: "tokens in flight", p: with(ModeTokens), c: Check{Total: 100, UnfoldedTokens: 10000, TurnTokens: uniform(100), InFlight: true}, reason: SkipAlreadyInFlight},
		{name: "tokens in backoff", p: with(ModeTokens), c: Check{Total: 100, UnfoldedTokens: 10000, TurnTokens: uniform(100), Backoff: true}, reason: SkipRetryBackoff},
		{name: "tokens forced", p: with(ModeTokens), c: Check{Total: 30, UnfoldedTokens: 3000, TurnTokens: uniform(100), Force: true},
			action: ActionFold, cause: CauseForced, from: 0, to: 10},

		// trigger 9000; target 7000: drop 21 turns of 100 (9100 → 7000).
		{name: "evict down to the target", p: with(ModeEvict), c: Check{Total: 91, UnfoldedTokens: 9100, TurnTokens: uniform(100)},
			action: ActionEvict, cause: CauseThreshold, from: 0, to: 21},
		{name: "evict keeps min_keep_messages", p: with(ModeEvict), c: Check{Total: 12, UnfoldedTokens: 9600, TurnTokens: uniform(800)},
			action: ActionEvict, cause: CauseThreshold, from: 0, to: 2},
		{name: "evict below the trigger", p: with(ModeEvict), c: Check{Total: 90, UnfoldedTokens: 9000, TurnTokens: uniform(100)}, reason: SkipBelowThreshold},
		{name: "evict ignores the emergency fraction", p: with(ModeEvict), c: Check{Total: 85, UnfoldedTokens: 8500, TurnTokens: uniform(100)}, reason: SkipBelowThreshold},
		{name: "disabled wins", p: with(ModeEvict), c: Check{Total: 91, UnfoldedTokens: 9100, Disabled: true}, reason: SkipDisabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); err != nil {
				t.Fatalf("policy: %v", err)
			}
			d := tt.p.Plan(tt.c)
			if d.Action != tt.action || d.Reason != tt.reason {
				t.Fatalf("got action %d reason %q (cause %q, estimate %d, limit %d); want action %d reason %q",
					d.Action, d.Reason, d.Cause, d.Estimate, d.Limit, tt.action, tt.reason)
			}
			if d.Action == ActionNone {
				if d.Fold {
					t.Fatal("Fold set without an action")
				}
				return
			}
			if d.Cause != tt.cause || d.From != tt.from || d.To != tt.to || !d.Fold {
				t.Fatalf("got %s [%d,%d) fold=%v, want %s [%d,%d)", d.Cause, d.From, d.To, d.Fold, tt.cause, tt.from, tt.to)
			}
		})
	}
}

func TestPolicyValidateNamesTheSetting(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"mode", func(p *Policy) { p.Mode = "rolling" }, "mode"},
		{"reserve", func(p *Policy) { p.Tokens.ReserveTokens = p.Tokens.ContextWindow }, "reserve tokens"},
		{"idle above emergency", func(p *Policy) { p.Tokens.IdleThreshold = 0.9 }, "idle threshold"},
		{"evict target above trigger", func(p *Policy) { p.Mode = ModeEvict; p.Evict.TargetUtilization = 0.95 }, "target utilization"},
		{"interval not set", func(p *Policy) { p.Interval.Exchanges = 0 }, "interval_exchanges"},
		{"min fold tokens", func(p *Policy) { p.Window.MinFoldTokens = -1 }, "min_fold_tokens"},
		{"min fold tokens above its range", func(p *Policy) { p.Window.MinFoldTokens = events.MaxMinFoldTokens + 1 }, "min_fold_tokens"},
	}
	for _, tt := range tests {
		p := DefaultPolicy()
		tt.edit(&p)
		err := p.Validate()
		if err == nil || !contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.name, err, tt.want)
		}
	}
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatalf("default policy: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The reserve, unless set, follows the window: the 16,384 tokens
// capped at a quarter of the window (docs/modes.md). A small model's
// window then works with every other setting at its default.
func TestReserveFollowsTheWindow(t *testing.T) {
	for window, want := range map[int]int{8000: 2000, 32000: 8000, 65536: 16384, 128000: 16384, 1 << 20: 16384} {
		if got := ReserveFor(window); got != want {
			t.Errorf("ReserveFor(%d) = %d, want %d", window, got, want)
		}
		p := DefaultPolicy()
		p.Mode, p.Tokens.ContextWindow = ModeTokens, window
		if err := p.Validate(); err != nil {
			t.Errorf("mode tokens, window %d, reserve not set: %v", window, err)
		}
		if got := p.Tokens.Trigger(); got != window-want {
			t.Errorf("window %d: trigger %d, want %d", window, got, window-want)
		}
	}
	p := DefaultPolicy()
	p.Tokens.ReserveTokens = 1000 // set: taken as it is
	if got := p.Tokens.Trigger(); got != 127000 {
		t.Errorf("an explicit reserve: trigger %d, want 127000", got)
	}
}

// A mode is one file: every file mode_<name>.go registers the engine of
// mode <name>, every registered mode has its file, and each engine is
// complete: a docs row, settings, a plan whose action agrees with what it
// says of itself, and defaults that validate.
func TestEveryModeIsOneFile(t *testing.T) {
	files, err := filepath.Glob("mode_*.go")
	if err != nil {
		t.Fatal(err)
	}
	named := map[Mode]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		m := Mode(strings.TrimSuffix(strings.TrimPrefix(f, "mode_"), ".go"))
		named[m] = true
		if _, ok := Lookup(m); !ok {
			t.Errorf("%s does not register mode %s", f, m)
		}
	}
	if len(named) == 0 {
		t.Fatal("no mode files found")
	}
	for _, e := range Engines() {
		m := e.Name()
		if !named[m] {
			t.Errorf("mode %s is registered outside a file mode_%s.go", m, m)
		}
		if e.Doc().Summary == "" || e.Doc().Bot == "" {
			t.Errorf("mode %s has no docs row", m)
		}
		for _, key := range e.Settings() {
			if key == "" || strings.ToLower(key) != key {
				t.Errorf("mode %s lists setting %q, want a configure key", m, key)
			}
		}
		p := DefaultPolicy()
		p.Mode = m
		if err := p.Validate(); err != nil {
			t.Errorf("mode %s with the defaults: %v", m, err)
		}
		// A long session over every threshold, forced: each mode plans
		// something to leave the window, by its declared action.
		c := Check{Cursor: 0, Total: 100, Force: true, Exchanges: 100, UnfoldedTokens: 200000,
			TurnTokens: func(int) int { return 2000 }}
		d := p.Plan(c)
		if !d.Fold || d.To <= d.From {
			t.Errorf("mode %s: a forced plan over every threshold folds nothing: %+v", m, d)
			continue
		}
		if want := map[bool]Action{true: ActionFold, false: ActionEvict}[e.Summarizes()]; d.Action != want {
			t.Errorf("mode %s: summarizes %v but its plan's action is %v", m, e.Summarizes(), d.Action)
		}
		if d.Action == ActionEvict && e.Note(Eviction{Count: 3, Tokens: 30}) == "" {
			t.Errorf("mode %s evicts without a note to stand for what it dropped", m)
		}
		if fb := e.WithoutRecall(); fb != "" {
			if fe, ok := Lookup(fb); !ok || fe.WithoutRecall() != "" {
				t.Errorf("mode %s falls back to %q without recall, which is not a mode that works without recall", m, fb)
			}
		}
	}
	if p := (Policy{Mode: "nope"}); p.Validate() == nil || !strings.Contains(p.Validate().Error(), strings.Join(ModeNames(), ", ")) {
		t.Errorf("an unknown mode: %v, want an error listing %v", p.Validate(), ModeNames())
	}
	if Engines()[0].Name() != DefaultMode {
		t.Errorf("the default mode %s is not listed first", DefaultMode)
	}
}

// Mode evict's fold calls no summarizer: its outcome is the eviction note,
// cumulative over the session's evictions, and the evicted record of the
// batch.
func TestEvictSummarizeReturnsItsNote(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	pol := DefaultPolicy()
	pol.Mode = ModeEvict
	req := Request{
		Turns:   []Turn{{Index: 4, At: t0.Add(time.Minute), Tokens: 10}, {Index: 5, At: t0.Add(2 * time.Minute), Tokens: 20}},
		Evicted: Eviction{Count: 4, Tokens: 40, First: t0},
	}
	out, err := pol.Engine().Summarize(context.Background(), nil, req, pol, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := pol.Engine().Note(Eviction{Count: 6, Tokens: 70, First: t0, Last: t0.Add(2 * time.Minute)})
	if out.Summary != want || !out.Note || out.Tier != TierEvicted || out.Model != "none" || out.Calls != 0 {
		t.Fatalf("outcome %+v, want the note %q", out, want)
	}
	e := out.Evicted
	if e == nil || e.Count != 2 || e.Tokens != 30 || e.FromTurn != 4 || e.ToTurn != 5 || e.Cursor != 6 || e.TotalEvicted != 6 ||
		!e.First.Equal(t0.Add(time.Minute)) || !e.Last.Equal(t0.Add(2*time.Minute)) || e.Note != want {
		t.Fatalf("evicted record %+v", e)
	}
	if d := pol.PlanEnd(0, 10, 1); d.Fold {
		t.Fatalf("mode evict planned a final fold: %+v", d)
	}
}

// WithDefaults fills only the settings left unset.
func TestPolicyWithDefaults(t *testing.T) {
	d := DefaultPolicy()
	if got := (Policy{}).WithDefaults(); got.Mode != d.Mode || got.Window != d.Window || got.Tokens != d.Tokens || got.Evict != d.Evict || got.Interval != d.Interval {
		t.Fatalf("an empty policy: %+v, want the defaults %+v", got, d)
	}
	set := Policy{Mode: ModeTokens, Window: Window{Recent: 20, Batch: 5}, Tokens: TokenPolicy{ContextWindow: 8000, IdleThreshold: 0.5}, Evict: EvictPolicy{MinKeepMessages: 3}}
	got := set.WithDefaults()
	if got.Mode != ModeTokens || got.Window.Recent != 20 || got.Window.Batch != 5 || got.Window.MaxSummaryChars != d.Window.MaxSummaryChars ||
		got.Tokens.ContextWindow != 8000 || got.Tokens.IdleThreshold != 0.5 || got.Tokens.ReserveTokens != 0 || got.Tokens.ChunkFraction != d.Tokens.ChunkFraction ||
		got.Evict.MinKeepMessages != 3 || got.Evict.TargetUtilization != d.Evict.TargetUtilization || got.Interval != d.Interval {
		t.Fatalf("a policy with settings: %+v", got)
	}
}
