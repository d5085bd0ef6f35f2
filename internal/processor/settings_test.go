package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
)

// Every declared setting (events.Settings) a session configures reaches
// its policy: a configure with a value other than the deployment's changes
// the policy the session folds with. The other surfaces of each setting
// are walked in cmd/processor (TestEverySettingOnEverySurface).
func TestEverySettingIsApplied(t *testing.T) {
	base := Config{}.withDefaults().policy()
	// Read by the session's reset policy (state.Session.ResetDue) from
	// the checkpoint's config, not by the fold policy.
	byReset := map[string]bool{"reset_idle_minutes": true, "reset_hour": true}
	for _, s := range events.Settings {
		if byReset[s.Key] {
			continue
		}
		v := s.Min + 1
		if s.Exclusive {
			v = (s.Min + s.Max) / 2
		}
		var c events.SessionConfig
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{%q: %s}`, s.Key, strconv.FormatFloat(v, 'f', -1, 64))), &c); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s=%v: %v", s.Key, v, err)
		}
		if got := withOverrides(base, &c); reflect.DeepEqual(got, base) {
			t.Errorf("configure %s=%v left the session's policy as the deployment's", s.Key, v)
		}
	}
}

// A session's policy is resolved once per configuration, not per turn:
// sessions without a configure share the deployment's, a configured one's
// is kept until a configure installs another.
func TestPolicyResolvedOncePerConfiguration(t *testing.T) {
	r := newRig(t)
	p, err := New(Config{Mode: fold.ModeEvict}, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log})
	if err != nil {
		t.Fatal(err)
	}
	sh := newShard(p, 0, context.Background())
	ls := &live{s: state.New("s1")}
	if got := sh.co.sm.policy(ls); got.Mode != fold.ModeTokens || len(sh.co.sm.policies) != 0 {
		t.Fatalf("unconfigured: mode %s, %d resolved, want the deployment's (evict without recall: tokens), none resolved", got.Mode, len(sh.co.sm.policies))
	}
	batch := 7
	ls.s.Config = &events.SessionConfig{Mode: events.ModeWindow, BatchSize: batch}
	for range 3 {
		if got := sh.co.sm.policy(ls); got.Mode != fold.ModeWindow || got.Window.Batch != batch {
			t.Fatalf("configured: %+v", got.Window)
		}
	}
	if len(sh.co.sm.policies) != 1 {
		t.Fatalf("%d policies resolved for one configuration over three turns, want 1", len(sh.co.sm.policies))
	}
	ls.s.Config = &events.SessionConfig{Mode: events.ModeInterval, IntervalExchanges: 3}
	if got := sh.co.sm.policy(ls); got.Mode != fold.ModeInterval || got.Interval.Exchanges != 3 {
		t.Fatalf("reconfigured: mode %s, exchanges %d", got.Mode, got.Interval.Exchanges)
	}
}

// A negative idle wait turns idle folds off: the defaults keep it, and a
// session in mode tokens gets no idle wake; a zero one takes the default.
func TestIdleFoldsOff(t *testing.T) {
	off := Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{IdleAfter: -1}}.withDefaults().policy()
	if _, _, ok := off.Engine().Idle(off); ok {
		t.Errorf("IdleAfter -1: idle folds on (%s)", off.Tokens.IdleAfter)
	}
	if err := off.Validate(); err != nil {
		t.Errorf("IdleAfter -1: %v", err)
	}
	on := Config{Mode: fold.ModeTokens}.withDefaults().policy()
	if after, _, ok := on.Engine().Idle(on); !ok || after != fold.DefaultPolicy().Tokens.IdleAfter {
		t.Errorf("IdleAfter 0: idle after %s (on %v), want the default %s", after, ok, fold.DefaultPolicy().Tokens.IdleAfter)
	}
}
