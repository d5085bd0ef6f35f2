package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func direct(t *testing.T, e *servicetest.Env, opts ...service.Option) *service.Direct {
	t.Helper()
	d, err := service.NewDirect(t, context.Background(), e.JS, e.Layout, e.Store, e.Log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// indexQueries are asked of every session in the equivalence tests: with
// and without a budget, a query that matches many turns and one that
// matches few.
var indexQueries = []client.ContextRequest{
	{Query: "tournament form friday"},
	{Query: "message from Bob about the match", BudgetChars: 2500},
	{Query: "Lisbon Saturday", BudgetChars: 1200, RecallTurns: 2},
	{Query: "number 007 Alice", BudgetTokens: 400},
}

// sameAnswers asserts that the indexed instances answer every query and a
// recall exactly like a fresh scan of the stream (the reference).
func sameAnswers(t *testing.T, what, session string, ref *service.Direct, others ...*service.Direct) {
	t.Helper()
	ctx := context.Background()
	for _, q := range indexQueries {
		q.Session = session
		want, err := ref.Context(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(want)
		for i, d := range others {
			got, err := d.Context(ctx, q)
			if err != nil {
				t.Fatalf("%s: instance %d: %v", what, i, err)
			}
			if gotJSON, _ := json.Marshal(got); string(gotJSON) != string(wantJSON) {
				t.Fatalf("%s: instance %d answers %+v\n%s\nthe fresh scan\n%s", what, i, q, gotJSON, wantJSON)
			}
		}
	}
	for _, scope := range []string{client.RecallScopeEvicted, client.RecallScopeAll} {
		r := client.RecallRequest{Session: session, Query: "tournament form message", Scope: scope, Limit: 50}
		want, err := ref.Recall(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(want)
		for i, d := range others {
			got, err := d.Recall(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if gotJSON, _ := json.Marshal(got); string(gotJSON) != string(wantJSON) {
				t.Fatalf("%s: instance %d recall %s\n%s\nthe fresh scan\n%s", what, i, scope, gotJSON, wantJSON)
			}
		}
	}
}

// The index kept in memory and caught up request by request answers like
// a fresh scan of the stream: as turns arrive, with repeated turn ids,
// after a restart (a new instance builds it from the stream), and after
// a reset (nothing of before it, never a stale answer).
func TestIndexAnswersLikeAFreshScan(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	scan := direct(t, e, service.IndexBytes(0))
	warm := direct(t, e)

	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	sameAnswers(t, "64 turns", "s1", scan, warm)

	// More turns, one of them a repeat of an old turn_id the stream's
	// duplicate window no longer stops (pubSeq sets no message id).
	publishWith(t, e, "s1", 64, 90, map[int]string{70: "Who brings the tournament form to Lisbon?"})
	pubSeq(t, e, e.Layout.Subjects.In("s1", events.KindTurn), textTurn("s1", 3, "Can someone remind me to send the tournament form by Friday?"))
	// Settled, not only applied: a fold landing between the reference's
	// answer and an instance's would give them different summaries (91
	// turns, 50 recent, folds of 10: cursor 40).
	e.Settled("s1", 91, 40)
	sameAnswers(t, "90 turns and a repeat", "s1", scan, warm)

	// A restart: a new instance builds its index from the stream.
	sameAnswers(t, "after a restart", "s1", scan, warm, direct(t, e))

	// A reset, then a new life: the warm index must not answer from
	// before it, even before the processor has applied the reset.
	pubSeq(t, e, e.Layout.Subjects.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpReset, At: testenv.T0.Add(time.Hour)})
	c, err := warm.Context(context.Background(), client.ContextRequest{Session: "s1", Query: "tournament form friday lisbon"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Recalled) != 0 || c.TotalTurns != 0 {
		t.Fatalf("right after a reset: total %d, recalled %+v", c.TotalTurns, c.Recalled)
	}
	for i := range 70 {
		turn := testenv.Turn("s1", 200+i)
		if i == 5 {
			turn.Text = "The new tournament form is due Monday."
		}
		data, _ := json.Marshal(turn)
		if _, err := e.JS.Publish(context.Background(), e.Layout.Subjects.In("s1", events.KindTurn), data); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually("the new life folded", func() bool { c := e.Checkpoint("s1"); return c.Total == 70 && c.Cursor > 0 && c.Lease == nil })
	sameAnswers(t, "after a reset", "s1", scan, warm, direct(t, e))
	c, err = warm.Context(context.Background(), client.ContextRequest{Session: "s1", Query: "tournament form"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Recalled {
		if r.Index >= 70 || r.TurnID < "t200" {
			t.Fatalf("after a reset: recalled %+v from before it", r)
		}
	}
	if got := shownTurns(c); !slices.Contains(got, "t205") {
		t.Fatalf("after a reset: recalled %v, want the new form (t205)", got)
	}
}

// The index stays within its byte budget by evicting the least recently
// used sessions, reports it as metrics, and answers like a fresh scan
// whether a session was evicted or not.
func TestIndexStaysWithinItsBudget(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	sessions := []string{"a1", "a2", "a3", "a4"}
	for _, s := range sessions {
		publishWith(t, e, s, 0, 64, queryTexts)
	}
	for _, s := range sessions {
		e.Settled(s, 64, 10)
	}
	// Measure one session's index with an unbounded instance.
	one := direct(t, e)
	if _, err := one.Context(context.Background(), client.ContextRequest{Session: "a1", Query: "form"}); err != nil {
		t.Fatal(err)
	}
	size := one.IndexBytes()
	if size <= 0 {
		t.Fatalf("one session's index: %d bytes", size)
	}
	budget := 2*size + size/2 // room for two sessions
	reg := prometheus.NewRegistry()
	// Not persisted: every eviction is a build again, counted below (the
	// store's loads are TestStoredIndexIsLoadedAfterARestart's).
	small := direct(t, e, service.IndexBytes(budget), service.IndexStoreBytes(0), service.Registerer(reg))
	scan := direct(t, e, service.IndexBytes(0))
	for round := range 3 {
		for _, s := range sessions {
			sameAnswers(t, fmt.Sprintf("round %d session %s", round, s), s, scan, small)
			if b := small.IndexBytes(); b > budget || b <= 0 {
				t.Fatalf("index holds %d bytes, budget %d", b, budget)
			}
			if n := small.IndexedSessions(); n > 2 {
				t.Fatalf("%d sessions indexed within a budget for two", n)
			}
		}
	}
	metrics := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				metrics[mf.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				metrics[mf.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	if metrics["foldstream_recall_index_budget_bytes"] != float64(budget) ||
		metrics["foldstream_recall_index_bytes"] != float64(small.IndexBytes()) ||
		metrics["foldstream_recall_index_sessions"] != float64(small.IndexedSessions()) ||
		metrics["foldstream_recall_index_evictions_total"] == 0 ||
		metrics["foldstream_recall_index_builds_total"] <= float64(len(sessions)) {
		t.Fatalf("metrics %v (budget %d)", metrics, budget)
	}
	// Eight of the index, and the memory read failures.
	if n := testutil.CollectAndCount(reg); n != 9 {
		t.Fatalf("%d index metrics registered, want 9", n)
	}

	// A budget smaller than one session: built for the request, not kept.
	// (Without the store: a1's index, stored by the first instance, loads
	// in a more compact form than it is built in, and is preloaded.)
	tiny := direct(t, e, service.IndexBytes(size/2), service.IndexStoreBytes(0))
	sameAnswers(t, "tiny budget", "a2", scan, tiny)
	if tiny.IndexedSessions() != 0 || tiny.IndexBytes() != 0 {
		t.Fatalf("tiny budget keeps %d sessions, %d bytes", tiny.IndexedSessions(), tiny.IndexBytes())
	}
}

// Once the budget is full, a request drops the views its index made (the
// cleaned texts and terms, remade when asked) rather than evict another
// session: a budget that holds two sessions' indexes but not both with
// their views keeps both, each built once, and answers like a scan.
func TestIndexDropsViewsBeforeEvicting(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	sessions := []string{"a1", "a2"}
	for _, s := range sessions {
		publishWith(t, e, s, 0, 64, queryTexts)
	}
	for _, s := range sessions {
		e.Settled(s, 64, 10)
	}
	scan := direct(t, e, service.IndexBytes(0))
	// One session's index after the questions below, with its views.
	one := direct(t, e, service.IndexStoreBytes(0))
	sameAnswers(t, "measured", "a1", scan, one)
	with, views := one.IndexBytes(), one.ViewBytes()
	if views <= 0 || views >= with {
		t.Fatalf("one session: %d bytes, %d of them views", with, views)
	}
	budget := 2*with - views/2
	small := direct(t, e, service.IndexBytes(budget), service.IndexStoreBytes(0))
	for round := range 2 {
		for _, s := range sessions {
			sameAnswers(t, fmt.Sprintf("round %d session %s", round, s), s, scan, small)
			if b := small.IndexBytes(); b > budget {
				t.Fatalf("index holds %d bytes, budget %d", b, budget)
			}
		}
	}
	if n, c := small.IndexedSessions(), small.IndexCounters(); n != 2 || c.Builds != 2 {
		t.Fatalf("%d sessions kept, %v builds; want both kept, each built once", n, c.Builds)
	}
}

// Turns gone from the stream (max-age, or removed by hand) cannot be
// recalled: the context says which, and the others keep their indices.
func TestIndexSaysWhichTurnsAreMissing(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	warm := direct(t, e)
	if _, err := warm.Context(context.Background(), client.ContextRequest{Session: "s1", Query: "form"}); err != nil {
		t.Fatal(err)
	}
	in, err := e.JS.Stream(context.Background(), e.Layout.In)
	if err != nil {
		t.Fatal(err)
	}
	// The first two turns of s1 are the stream's sequences 1 and 2.
	for seq := uint64(1); seq <= 2; seq++ {
		if err := in.DeleteMsg(context.Background(), seq); err != nil {
			t.Fatal(err)
		}
	}
	// An index built now, and one built before the turns went, answer
	// alike.
	sameAnswers(t, "turns 0-1 gone", "s1", direct(t, e, service.IndexBytes(0)), warm, direct(t, e))
	c, err := warm.Context(context.Background(), client.ContextRequest{Session: "s1", Query: "tournament form friday"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Missing == nil || c.Missing.From != 0 || c.Missing.To != 2 || c.Missing.Reason == "" {
		t.Fatalf("missing %+v, want turns [0, 2)", c.Missing)
	}
	if got := shownTurns(c); !slices.Equal(got, []string{"t003", "t004", "t006"}) {
		t.Fatalf("recalled %v, want t003 t004 t006", got)
	}
	for _, r := range c.Recalled {
		if r.Kind == client.RecalledTurn && r.TurnID != fmt.Sprintf("t%03d", r.Index) {
			t.Fatalf("recalled %s at index %d, not as the processor counts it", r.TurnID, r.Index)
		}
	}
	checkQueryContext(t, c, 0)
}

// A stream that went back (deleted and created again) is never answered
// from the index built on the old one.
func TestIndexRebuildsWhenTheStreamWentBack(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	ctx := context.Background()
	publishWith(t, e, "s1", 0, 30, map[int]string{3: "the old tournament form"})
	warm := direct(t, e)
	all := client.RecallRequest{Session: "s1", Query: "tournament form", Scope: client.RecallScopeAll}
	r, err := warm.Recall(ctx, all)
	if err != nil || len(r.Results) != 1 {
		t.Fatalf("before: %v %+v", err, r)
	}
	if err := e.JS.DeleteStream(ctx, e.Layout.In); err != nil {
		t.Fatal(err)
	}
	if _, err := broker.Provision(ctx, e.JS, e.Layout, broker.ProvisionConfig{}, e.Log); err != nil {
		t.Fatal(err)
	}
	publishWith(t, e, "s1", 100, 105, map[int]string{101: "a new tournament form"})
	r, err = warm.Recall(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 1 || r.Results[0].TurnID != "t101" || r.Searched != 5 {
		t.Fatalf("after the stream was created again: %+v", r)
	}
}
