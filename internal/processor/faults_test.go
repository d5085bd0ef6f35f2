package processor

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/crashtest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// modelRig is the rig with crashtest's Model behind the real go-openai
// client: its summaries name the message numbers they fold, so
// crashtest.Verify can check that every batch landed exactly once.
func newModelRig(t *testing.T, policy retry.Policy) (*rig, *crashtest.Model) {
	t.Helper()
	r := newRig(t)
	m := crashtest.NewModel(t, 1, 0)
	sum, err := openai.New(openai.Config{BaseURL: m.URL, APIKey: "k", Model: "fold-mini", Timeout: 5 * time.Second, Retry: policy}, r.Log)
	if err != nil {
		t.Fatal(err)
	}
	r.sum = sum
	return r, m
}

func (r *rig) env() crashtest.Env { return crashtest.Env{JS: r.JS, Layout: r.Layout, Store: r.Store} }

// publishTurns publishes turns [from, to) of session, as crashtest does.
func (r *rig) publishTurns(session string, from, to int) {
	r.t.Helper()
	for n := from; n < to; n++ {
		if _, err := crashtest.Publish(context.Background(), r.JS, r.Layout.Subjects, session, n, true); err != nil {
			r.t.Fatal(err)
		}
	}
}

// settle waits until every session has folded all it can, or fails after
// 20s. It sends nothing: failed and interrupted folds must be retried
// without a new event.
func (r *rig) settle(expects ...crashtest.Expect) {
	r.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pending := 0
		for _, e := range expects {
			s, _, err := r.Store.Load(ctx, e.Session)
			if err != nil {
				r.t.Fatal(err)
			}
			if !crashtest.Settled(s, e) {
				pending++
			}
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, e := range expects {
				s, _, _ := r.Store.Load(ctx, e.Session)
				r.t.Logf("%s: total %d/%d cursor %d/%d lease %v failures %d", e.Session, s.Total, e.Turns, s.Cursor,
					crashtest.FinalCursor(e.Turns, e.Recent, e.Batch), s.Lease, s.Failures)
			}
			r.t.Fatal("sessions did not settle")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// longAnswer is an over-long summary whose first sentence is the Model's.
func longAnswer(c crashtest.Call, chars int) string {
	var b strings.Builder
	b.WriteString(crashtest.SummaryText(c.Session, c.Numbers))
	for b.Len() < chars {
		b.WriteString(" Alice and Bob went on about the weekend plans at some length.")
	}
	return b.String()
}

func reply(r openaitest.Reply) *openaitest.Reply { return &r }

// TestModelFaults drives the real HTTP path through model faults. In
// every case the faulty session keeps ingesting, a failed fold moves
// nothing (no cursor or version change, reported with its class), every
// summary that lands is non-empty and within budget and folds exactly the
// next batch, nothing is lost, and folds succeed once the model recovers.
// A second session, served normally, is never held up.
func TestModelFaults(t *testing.T) {
	const recent, batch, budget, turns = 6, 4, 300, 22
	quick := retry.Policy{MaxAttempts: 1}
	cases := []struct {
		name        string
		policy      retry.Policy
		foldTimeout time.Duration
		// fault answers the n-th call (0-based) for the faulty session;
		// nil = the normal answer.
		fault     func(n int, c crashtest.Call) *openaitest.Reply
		class     string // compaction_failed error class expected, "" = none
		retryable bool
		tier      fold.Tier // a summary of this tier is expected
		// minGap is a lower bound on the wait between the first two calls
		// (Retry-After honoured).
		minGap time.Duration
	}{
		{name: "hang past the fold timeout", policy: quick, foldTimeout: 300 * time.Millisecond,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 2 {
					return reply(openaitest.Hang())
				}
				return nil
			}, class: "timeout", retryable: true},
		{name: "429 storm with Retry-After-Ms", policy: retry.Policy{MaxAttempts: 3, Initial: 5 * time.Millisecond, Max: time.Second},
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 7 {
					r := openaitest.RateLimited(0)
					r.Header = http.Header{"Retry-After-Ms": {"25"}}
					return &r
				}
				return nil
			}, class: "rate_limited", retryable: true, minGap: 25 * time.Millisecond},
		{name: "429 with Retry-After in seconds", policy: retry.Policy{MaxAttempts: 3, Initial: 5 * time.Millisecond, Max: 5 * time.Second},
			foldTimeout: 5 * time.Second,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n == 0 {
					return reply(openaitest.RateLimited(time.Second))
				}
				return nil
			}, minGap: time.Second},
		{name: "500s", policy: retry.Policy{MaxAttempts: 2, Initial: 5 * time.Millisecond, Max: time.Second},
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 5 {
					return reply(openaitest.ServerError())
				}
				return nil
			}, class: "server", retryable: true},
		{name: "malformed JSON", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 2 {
					return reply(openaitest.Malformed())
				}
				return nil
			}, class: "invalid_output"},
		{name: "empty answers", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 2 {
					return reply(openaitest.Empty())
				}
				return nil
			}, class: "invalid_output"},
		{name: "content filter", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 2 {
					return reply(openaitest.ContentFiltered())
				}
				return nil
			}, class: "invalid_output"},
		{name: "refusal", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n == 0 {
					return reply(openaitest.OK("I'm sorry, but I can't help with summarizing this conversation."))
				}
				return nil
			}, class: "invalid_output"},
		{name: "echoed prompt", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n == 0 {
					return reply(openaitest.OK(c.Request.Messages[len(c.Request.Messages)-1].Content))
				}
				return nil
			}, class: "invalid_output"},
		{name: "bad request", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n == 0 {
					return reply(openaitest.BadRequest("unsupported parameter"))
				}
				return nil
			}, class: "bad_request"},
		{name: "over-long answer, recompacted", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n == 0 {
					return reply(openaitest.OK(longAnswer(c, 3*budget)))
				}
				return nil // the re-compaction pass answers with the first sentence
			}, tier: fold.TierRecompacted},
		{name: "over-long answer, clamped", policy: quick,
			fault: func(n int, c crashtest.Call) *openaitest.Reply {
				if n < 2 { // the fold and its re-compaction pass
					if c.Recompact {
						return reply(openaitest.OK(longAnswer(crashtest.Call{Session: "s1", Numbers: []int{0, 1, 2, 3}}, 2*budget)))
					}
					return reply(openaitest.OK(longAnswer(c, 3*budget)))
				}
				return nil
			}, tier: fold.TierClamped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, m := newModelRig(t, tc.policy)
			var mu sync.Mutex
			var faulty []crashtest.Call
			m.SetFault(func(c crashtest.Call) *openaitest.Reply {
				if c.Session != "s1" {
					return nil
				}
				mu.Lock()
				n := len(faulty)
				faulty = append(faulty, c)
				mu.Unlock()
				return tc.fault(n, c)
			})
			w, err := crashtest.Watch(context.Background(), r.kvBucket(), batch)
			if err != nil {
				t.Fatal(err)
			}
			r.start(Config{Window: fold.Window{Recent: recent, Batch: batch, MaxSummaryChars: budget},
				FoldTimeout: tc.foldTimeout, RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond})
			r.publishTurns("s1", 0, turns)
			r.publishTurns("s2", 0, turns)
			expects := []crashtest.Expect{
				{Session: "s1", Turns: turns, Recent: recent, Batch: batch, MaxSummaryChars: budget},
				{Session: "s2", Turns: turns, Recent: recent, Batch: batch, MaxSummaryChars: budget},
			}
			r.settle(expects...)
			for _, e := range expects {
				for _, p := range crashtest.Verify(context.Background(), r.env(), m, e) {
					t.Error(p)
				}
			}
			problems, _ := w.Stop()
			for _, p := range problems {
				t.Error("checkpoint write: " + p)
			}

			var failed []events.Lifecycle
			for _, ev := range r.Lifecycle("s1") {
				if ev.Type == events.EventCompactionFailed {
					failed = append(failed, ev)
				}
			}
			switch {
			case tc.class == "" && len(failed) > 0:
				t.Errorf("unexpected failed folds: %+v", failed)
			case tc.class != "" && len(failed) == 0:
				t.Errorf("no compaction_failed event, want class %s", tc.class)
			}
			for _, ev := range failed {
				// A failure names its class, and the batch it could not fold
				// starts at the cursor: nothing moved.
				if ev.ErrorClass != tc.class || ev.Retryable == nil || *ev.Retryable != tc.retryable || ev.BatchFrom != ev.Cursor || ev.Error == "" {
					t.Errorf("compaction_failed %+v, want class %s retryable %v at the cursor", ev, tc.class, tc.retryable)
				}
			}
			for _, ev := range r.Lifecycle("s2") {
				if ev.Type == events.EventCompactionFailed {
					t.Errorf("the healthy session s2 failed a fold: %+v", ev)
				}
			}
			if tc.tier != "" {
				found := false
				for _, s := range r.Summaries("s1") {
					found = found || s.Tier == string(tc.tier)
				}
				if !found {
					t.Errorf("no summary with tier %s", tc.tier)
				}
			}
			if tc.minGap > 0 {
				if len(faulty) < 2 {
					t.Fatalf("%d calls", len(faulty))
				}
				if gap := faulty[1].Request.At.Sub(faulty[0].Request.At); gap < tc.minGap {
					t.Errorf("retried after %s, the server asked for at least %s", gap, tc.minGap)
				}
			}
		})
	}
}

// kvBucket is the checkpoint bucket.
func (r *rig) kvBucket() jetstream.KeyValue {
	r.t.Helper()
	kv, err := r.JS.KeyValue(context.Background(), r.Layout.Bucket)
	if err != nil {
		r.t.Fatal(err)
	}
	return kv
}

// A fold interrupted by a crash leaves its lease in the checkpoint. Once
// the lease's deadline passes, the batch must be folded again — even if
// the bot sends nothing more (a call that ended, an agent waiting for the
// user).
func TestInterruptedFoldIsResumedWithoutNewEvents(t *testing.T) {
	r, m := newModelRig(t, retry.Policy{MaxAttempts: 1})
	r.publishTurns("s1", 0, 11) // 11 > 6+4: batch [0,4) is due
	ctx := context.Background()
	s := state.New("s1")
	in, _ := r.JS.Stream(ctx, r.Layout.In)
	info, _ := in.Info(ctx)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		s.AddTurn(state.HashID(crashtest.TurnID("s1", int(seq-1))), state.TurnRef{Seq: seq})
	}
	s.LastSeq = info.State.LastSeq
	// The previous owner died during the fold of [0,4).
	s.Lease = &state.Lease{FoldID: "crashed", Owner: "dead", Deadline: time.Now().Add(300 * time.Millisecond), From: 0, To: 4}
	if _, err := r.Store.Save(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}})
	r.Settled("s1", 11, 4)
	for _, p := range crashtest.Verify(ctx, r.env(), m, crashtest.Expect{Session: "s1", Turns: 11, Recent: 6, Batch: 4, MaxSummaryChars: 1200}) {
		t.Error(p)
	}
}

// With a wrong API key every fold would fail with retryable false and be
// retried at the normal backoff for as long as the key was wrong, and
// nothing would say that the deployment was broken. The first 401
// opens the summarizer's breaker: the model is not called again however
// often sessions come due, Health (the /healthz of cmd/processor) says why,
// the breaker gauge says open, one error log says so; once the key is
// fixed a compact control probes at once and every session folds.
func TestWrongKeyStopsModelCallsUntilFixed(t *testing.T) {
	r := newRig(t)
	var logs testlog.Buffer
	r.breaker = retry.NewBreaker(retry.BreakerConfig{Endpoint: "openai", OpenFor: time.Hour}, zerolog.New(&logs))
	r.reg = prometheus.NewRegistry()
	r.llm.RequireKey("rotated") // the deployment still sends "k": every call is answered 401
	p, _ := r.start(Config{RetryBackoffMax: 100 * time.Millisecond})
	sessions := []string{"key-1", "key-2", "key-3"}
	for _, s := range sessions {
		r.Turns(s, 61) // each has a fold due
	}
	r.Eventually("the breaker opens", func() bool { ok, _ := p.Health(); return !ok })
	for _, s := range sessions {
		r.Eventually(s+" applied, no fold in flight", func() bool { c := r.Checkpoint(s); return c.Total == 61 && c.Lease == nil })
	}
	calls := r.llm.Calls()
	if calls == 0 || calls > len(sessions) {
		t.Fatalf("%d model calls before the breaker opened, want 1..%d (one per fold that had started)", calls, len(sessions))
	}
	// Sessions keep coming due (their backoff is 100ms): every check is
	// refused by the breaker without a model call.
	skipped := p.m.skips.WithLabelValues(string(fold.SkipRetryBackoff))
	base := testutil.ToFloat64(skipped)
	r.Eventually("due checks refused", func() bool { return testutil.ToFloat64(skipped) >= base+15 })
	if got := r.llm.Calls(); got != calls {
		t.Fatalf("the model was called %d more times while the breaker was open", got-calls)
	}
	ok, reason := p.Health()
	if ok || !strings.Contains(reason, "auth (status 401)") || !strings.Contains(reason, "openai") {
		t.Fatalf("health %v %q: want degraded, naming the endpoint and the auth failure", ok, reason)
	}
	if got := testutil.ToFloat64(p.m.breakerState); got != float64(retry.BreakerOpen) {
		t.Fatalf("breaker gauge %v, want %d (open)", got, retry.BreakerOpen)
	}
	if n := bytes.Count(logs.Bytes(), []byte(`"event":"summarizer_unavailable"`)); n != 1 {
		t.Fatalf("%d summarizer_unavailable logs for one outage, want 1", n)
	}
	var sawAuth bool
	for _, s := range sessions {
		for _, e := range lifecycleOf(r.Lifecycle(s), events.EventCompactionFailed) {
			sawAuth = sawAuth || e.ErrorClass == string(retry.Auth) && e.Retryable != nil && !*e.Retryable
		}
	}
	if !sawAuth {
		t.Fatal("no compaction_failed with error class auth, retryable false")
	}

	// The key is fixed; a compact control retries at once (no waiting for
	// the hour-long probe), and the other sessions follow.
	r.llm.RequireKey("k")
	r.Control(sessions[0], events.OpCompact, nil)
	for _, s := range sessions {
		r.Settled(s, 61, 10)
	}
	if ok, reason := p.Health(); !ok {
		t.Fatalf("still degraded after the fix: %s", reason)
	}
	if got := testutil.ToFloat64(p.m.breakerState); got != float64(retry.BreakerClosed) {
		t.Fatalf("breaker gauge %v after the fix, want 0", got)
	}
	if n := bytes.Count(logs.Bytes(), []byte(`"event":"summarizer_available"`)); n != 1 {
		t.Fatalf("%d summarizer_available logs, want 1", n)
	}
}

// While the breaker is open a session past its emergency threshold (mode
// tokens) still folds, with a placeholder, which needs no model:
// its context stays bounded and the endpoint is not called again.
func TestOpenBreakerFoldsEmergencyWithAPlaceholder(t *testing.T) {
	r := newRig(t)
	r.breaker = retry.NewBreaker(retry.BreakerConfig{Endpoint: "openai", OpenFor: time.Hour}, r.Log)
	r.llm.RequireKey("rotated")
	p, _ := r.start(Config{Mode: fold.ModeTokens, RetryBackoffMax: 100 * time.Millisecond,
		Tokens: fold.TokenPolicy{ContextWindow: 4000, ReserveTokens: 400, KeepRecentTokens: 400, KeepRecentMessages: 2}})
	r.sizedTurns("em", 0, 33, 100) // 3300 tokens, over the emergency fraction 0.8 × 4000
	s := r.Settled("em", 33, 29)
	if !strings.Contains(s.Summary, "Summary unavailable") {
		t.Fatalf("placeholder summary: %q", s.Summary)
	}
	if ok, _ := p.Health(); ok {
		t.Fatal("the breaker closed without an answer")
	}
	if n := r.llm.Calls(); n != 1 {
		t.Fatalf("%d model calls, want 1 (the one that opened the breaker)", n)
	}
	done := lifecycleOf(r.Lifecycle("em"), events.EventCompactionCompleted)
	if len(done) != 1 || done[0].Tier != string(fold.TierPlaceholder) {
		t.Fatalf("completed %+v; want one placeholder fold", done)
	}
}
