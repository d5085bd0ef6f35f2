package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// textTurn is testenv.Turn(session, i) with another text.
func textTurn(session string, i int, text string) events.Turn {
	t := testenv.Turn(session, i)
	t.Text = text
	return t
}

// publishWith stores turns [from, to) of session, with texts[i] instead of
// the default text where set, and returns the last stream sequence.
func publishWith(t testing.TB, e *servicetest.Env, session string, from, to int, texts map[int]string) uint64 {
	t.Helper()
	ctx := context.Background()
	var last uint64
	for i := from; i < to; i++ {
		turn := testenv.Turn(session, i)
		if text, ok := texts[i]; ok {
			turn.Text = text
		}
		data, _ := json.Marshal(turn)
		ack, err := e.JS.Publish(ctx, e.Layout.Subjects.In(session, events.KindTurn), data, jetstream.WithMsgID(session+":"+turn.TurnID))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// pubSeq stores one raw inbound message (no Nats-Msg-Id, so the stream
// keeps repeats) and returns its sequence.
func pubSeq(t testing.TB, e *servicetest.Env, subject string, v any) uint64 {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := e.JS.Publish(context.Background(), subject, data)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func recall(t testing.TB, nc *nats.Conn, req client.RecallRequest) *client.Recall {
	t.Helper()
	data, _ := json.Marshal(req)
	m, err := nc.Request(client.ServiceSubject("fold", client.EndpointRecall), data, 20*time.Second)
	if err != nil {
		t.Fatalf("recall %+v: %v", req, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("recall %+v: %s %s", req, code, m.Header.Get(micro.ErrorHeader))
	}
	var r client.Recall
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Results == nil {
		t.Fatalf("recall %+v: results is null: %s", req, m.Data)
	}
	return &r
}

func resultIndices(r *client.Recall) []int64 {
	out := []int64{}
	for _, res := range r.Results {
		out = append(out, res.Index)
	}
	return out
}

// The evicted turn that matches the query comes first, with everything a
// builder needs to quote it; turns still verbatim in the prompt are not
// searched unless scope is all.
func TestRecallRanksTheMatchingEvictedTurnFirst(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	texts := map[int]string{
		3:  "Can someone remind me to send the tournament form by Friday?",
		6:  "The tournament itself is on Saturday.",
		40: "Carol already filled in the tournament form.",
	}
	publishWith(t, e, "s1", 0, 64, texts)
	e.Settled("s1", 64, 10)

	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "tournament form Friday"})
	if r.V != 1 || r.Session != "s1" || r.Query != "tournament form Friday" || r.Scope != client.RecallScopeEvicted || r.Cursor != 10 || r.Searched != 10 {
		t.Fatalf("reply header %+v", r)
	}
	if got := resultIndices(r); !slices.Equal(got, []int64{3, 6}) {
		t.Fatalf("evicted results %v, want [3 6] (turn 40 is still verbatim)", got)
	}
	best := r.Results[0]
	want := testenv.Turn("s1", 3)
	if best.TurnID != "t003" || !best.At.Equal(want.At) || best.Speaker != want.Speaker || best.Role != "user" || best.Text != texts[3] {
		t.Fatalf("best result %+v", best)
	}
	if !(best.Score > r.Results[1].Score && r.Results[1].Score > 0) {
		t.Fatalf("scores not descending and positive: %v, %v", best.Score, r.Results[1].Score)
	}

	// Other word forms meet: a possessive, a plural, upper case score
	// like the plain words.
	plain := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "friday form"})
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "Friday's FORMS"})
	if got := resultIndices(r); !slices.Equal(got, []int64{3}) || r.Results[0].Score != plain.Results[0].Score {
		t.Fatalf("normalised query: results %+v, want [3] scored like %+v", r.Results, plain.Results)
	}

	// Scope all searches the verbatim turns too.
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "tournament form", Scope: client.RecallScopeAll})
	if r.Searched != 64 || r.Scope != client.RecallScopeAll {
		t.Fatalf("scope all: searched %d, scope %q", r.Searched, r.Scope)
	}
	got := resultIndices(r)
	if len(got) != 3 || !slices.Contains(got, 40) || !slices.Contains(got, 3) || got[2] != 6 {
		t.Fatalf("scope all results %v, want 3 and 40 (both words) before 6", got)
	}
	// Nothing matches: no results, not an error.
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zeppelin"})
	if len(r.Results) != 0 || r.Searched != 10 {
		t.Fatalf("no match: %+v", r)
	}
}

// Equal scores go to the more recent turn, and limit caps the results.
func TestRecallLimitAndRecencyTies(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publish(t, e, "s1", 0, 64) // every text has the same words but its number
	e.Settled("s1", 64, 10)

	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "ranked match", Limit: 3})
	if got := resultIndices(r); !slices.Equal(got, []int64{9, 8, 7}) {
		t.Fatalf("limit 3 of evicted ties: %v, want [9 8 7]", got)
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "ranked match", Scope: client.RecallScopeAll})
	if got := resultIndices(r); len(got) != client.DefaultRecallLimit || got[0] != 63 || got[9] != 54 {
		t.Fatalf("default limit over all: %v, want 63..54", got)
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "ranked match", Scope: client.RecallScopeAll, Limit: client.MaxRecallLimit})
	if len(r.Results) != client.MaxRecallLimit || r.Results[49].Index != 14 {
		t.Fatalf("limit 50 over all: %d results, last %v", len(r.Results), resultIndices(r))
	}
	// A number is a word: the turn that names it wins over the ties.
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "ranked match 005", Limit: 2})
	if got := resultIndices(r); !slices.Equal(got, []int64{5, 9}) {
		t.Fatalf("query naming turn 5: %v, want [5 9]", got)
	}
}

func TestRecallBadRequestsNameTheField(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	publish(t, e, "s1", 0, 3)
	cases := []struct {
		req, code, says string
	}{
		{`{"v":1,"query":"form"}`, "400", `"session"`},
		{`{"v":1,"session":"a.b","query":"form"}`, "400", `"session"`},
		{`{"v":1,"session":"s1"}`, "400", `"query"`},
		{`{"v":1,"session":"s1","query":"   "}`, "400", `"query"`},
		{`{"v":1,"session":"s1","query":"?! …"}`, "400", `"query"`},
		{`{"v":1,"session":"s1","query":"` + strings.Repeat("a ", 513) + `"}`, "400", `"query"`},
		{`{"v":1,"session":"s1","query":"form","limit":51}`, "400", `"limit"`},
		{`{"v":1,"session":"s1","query":"form","limit":-1}`, "400", `"limit"`},
		{`{"v":1,"session":"s1","query":"form","scope":"recent"}`, "400", `"scope"`},
		{`{"v":2,"session":"s1","query":"form"}`, "400", `"v"`},
		{`not json`, "400", "bad request"},
		{`{"v":1,"session":"nobody","query":"form"}`, "404", `unknown session: "nobody"`},
		{`{"v":1,"session":"nobody","query":"form","scope":"all"}`, "404", `unknown session: "nobody"`},
	}
	for _, tc := range cases {
		m := ask(t, e.NC, client.EndpointRecall, []byte(tc.req))
		code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader)
		if code != tc.code || !strings.Contains(desc, tc.says) || len(m.Data) != 0 {
			t.Errorf("%.80s: got %q %q %q, want %s …%s…", tc.req, code, desc, m.Data, tc.code, tc.says)
		}
	}
	// v and limit may be omitted; a session the processor has not
	// checkpointed yet is known by its events.
	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "ranked", Scope: client.RecallScopeAll})
	if len(r.Results) != 3 || r.Cursor != 0 || r.Searched != 3 {
		t.Fatalf("uncheckpointed session: %+v", r)
	}
}

// A turn published twice is returned once, at its first index and with
// its first text, as the processor applied it; even a repeat the
// processor no longer remembered (beyond its dedup window) is not
// returned twice.
func TestRecallReturnsARepeatedTurnOnce(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	subj := e.Layout.Subjects.In("s1", events.KindTurn)
	pubSeq(t, e, subj, textTurn("s1", 0, "Meet at the zebra crossing."))
	pubSeq(t, e, subj, textTurn("s1", 0, "zebra zebra zebra")) // in-window repeat: ignored by the processor
	publishWith(t, e, "s1", 1, 300, nil)
	last := pubSeq(t, e, subj, textTurn("s1", 0, "Meet at the zebra crossing.")) // long after: beyond the window
	var cp *state.Session
	e.Eventually("processor caught up", func() bool {
		cp = e.Checkpoint("s1")
		return cp.LastSeq == last && cp.Lease == nil && cp.Total-cp.Cursor <= 60
	})
	t.Logf("processor counted %d turns for 300 distinct ids, cursor %d", cp.Total, cp.Cursor)

	for _, scope := range []string{client.RecallScopeEvicted, client.RecallScopeAll} {
		r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra", Scope: scope})
		if len(r.Results) != 1 || r.Results[0].Index != 0 || r.Results[0].TurnID != "t000" || r.Results[0].Text != "Meet at the zebra crossing." {
			t.Fatalf("scope %s: results %+v, want t000 once, at index 0, with its first text", scope, r.Results)
		}
		wantSearched := int(cp.Cursor)
		if scope == client.RecallScopeAll {
			wantSearched = 300
		}
		if r.Searched != wantSearched {
			t.Fatalf("scope %s: searched %d, want %d distinct turns", scope, r.Searched, wantSearched)
		}
	}
}

// After a reset the transcript starts over: turns before it are never
// returned, and indices count from the reset.
func TestRecallOnlySearchesSinceTheLastReset(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	_, stopProcessor := e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, map[int]string{2: "Meet at the zebra crossing."})
	e.Settled("s1", 64, 10)
	if r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra"}); !slices.Equal(resultIndices(r), []int64{2}) {
		t.Fatalf("before the reset: %v, want [2]", resultIndices(r))
	}

	control := e.Layout.Subjects.In("s1", events.KindControl)
	pubSeq(t, e, control, events.Control{V: 1, Session: "s1", Op: events.OpReset})
	subj := e.Layout.Subjects.In("s1", events.KindTurn)
	for i, text := range []string{"hello again", "a zebra after the reset", "bye"} {
		tu := textTurn("s1", i, text)
		tu.TurnID = fmt.Sprintf("r%d", i)
		pubSeq(t, e, subj, tu)
	}
	e.Settled("s1", 3, 0)
	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra", Scope: client.RecallScopeAll})
	if len(r.Results) != 1 || r.Results[0].TurnID != "r1" || r.Results[0].Index != 1 || r.Searched != 3 {
		t.Fatalf("after the reset, scope all: %+v (searched %d), want r1 at index 1 of 3", r.Results, r.Searched)
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra"})
	if len(r.Results) != 0 || r.Cursor != 0 || r.Searched != 0 {
		t.Fatalf("after the reset, scope evicted: %+v", r)
	}

	// A reset the processor has not applied yet already counts: its
	// checkpoint's cursor belongs to the transcript being forgotten.
	publishWith(t, e, "s1", 100, 164, map[int]string{101: "zebra in the third transcript"})
	e.Settled("s1", 67, 10)
	stopProcessor()
	pubSeq(t, e, control, events.Control{V: 1, Session: "s1", Op: events.OpReset})
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra"})
	if len(r.Results) != 0 || r.Cursor != 0 {
		t.Fatalf("unapplied reset, scope evicted: cursor %d, results %v", r.Cursor, resultIndices(r))
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra", Scope: client.RecallScopeAll})
	if len(r.Results) != 0 || r.Searched != 0 {
		t.Fatalf("unapplied reset, scope all: %+v", r)
	}
}

// checkpointFrom applies the session's inbound events with the processor's
// rules, moves the cursor to cursor without a summary (what mode evict
// does) and saves the checkpoint.
func checkpointFrom(t testing.TB, e *servicetest.Env, session string, cursor int64) *state.Session {
	t.Helper()
	ctx := context.Background()
	s, err := e.JS.Stream(ctx, e.Layout.In)
	if err != nil {
		t.Fatal(err)
	}
	sess := state.New(session)
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(e.Layout.Subjects.InSession(session)))
		if err != nil {
			break
		}
		seq = m.Sequence
		_, kind, _ := e.Layout.Subjects.ParseIn(m.Subject)
		in, err := events.DecodeInbound(kind, session, m.Data, events.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.Apply(seq, in); err != nil {
			t.Fatal(err)
		}
	}
	sess.Advance(cursor, 0)
	if _, err := e.Store.Save(ctx, sess, 0); err != nil {
		t.Fatal(err)
	}
	return sess
}

// A cursor moved without a summary (mode evict) is read from the
// checkpoint like any other; indices stay anchored to the checkpoint when
// the stream has lost the session's oldest turns; and a reset the
// checkpoint does not cover empties scope evicted.
func TestRecallWithAnEvictedCheckpoint(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 20, map[int]string{4: "zebra crossing", 15: "zebra crossing"})
	checkpointFrom(t, e, "s1", 12)

	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra"})
	if !slices.Equal(resultIndices(r), []int64{4}) || r.Cursor != 12 || r.Searched != 12 {
		t.Fatalf("evicted: %v, cursor %d, searched %d; want [4], 12, 12", resultIndices(r), r.Cursor, r.Searched)
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra", Scope: client.RecallScopeAll})
	if !slices.Equal(resultIndices(r), []int64{15, 4}) || r.Results[0].Score != r.Results[1].Score {
		t.Fatalf("all: %v, want the tie [15 4], newest first", r.Results)
	}

	// The stream loses its three oldest turns (max-age): the remaining
	// ones keep the processor's indices.
	ctx := context.Background()
	in, _ := e.JS.Stream(ctx, e.Layout.In)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := in.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra"})
	if !slices.Equal(resultIndices(r), []int64{4}) || r.Results[0].TurnID != "t004" || r.Searched != 9 {
		t.Fatalf("after losing turns 0-2: %v (searched %d), want [4] of 9", resultIndices(r), r.Searched)
	}

	// A reset after the checkpoint: nothing is evicted any more, and
	// scope all searches only what came after it.
	pubSeq(t, e, e.Layout.Subjects.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpReset})
	tu := textTurn("s1", 0, "zebra again")
	tu.TurnID = "r0"
	pubSeq(t, e, e.Layout.Subjects.In("s1", events.KindTurn), tu)
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra"})
	if len(r.Results) != 0 || r.Cursor != 0 {
		t.Fatalf("after an unapplied reset, evicted: %+v", r)
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra", Scope: client.RecallScopeAll})
	if len(r.Results) != 1 || r.Results[0].TurnID != "r0" || r.Results[0].Index != 0 {
		t.Fatalf("after an unapplied reset, all: %+v", r.Results)
	}
}

// A reset policy resets the session on an event's time, with no control
// event to find: recall replays the session's rules and starts over there
// too.
func TestRecallHonoursResetPolicies(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	control := e.Layout.Subjects.In("s1", events.KindControl)
	subj := e.Layout.Subjects.In("s1", events.KindTurn)
	pubSeq(t, e, control, events.Control{V: 1, Session: "s1", Op: events.OpConfigure,
		Config: &events.SessionConfig{ResetPolicy: events.ResetIdle, ResetIdleMinutes: 30}})
	publishWith(t, e, "s1", 0, 5, map[int]string{1: "zebra crossing"})
	for i, text := range []string{"hello, two hours later", "a zebra again"} {
		tu := textTurn("s1", 100+i, text)
		tu.At = testenv.T0.Add(2*time.Hour + time.Duration(i)*time.Second)
		pubSeq(t, e, subj, tu)
	}
	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra", Scope: client.RecallScopeAll})
	if len(r.Results) != 1 || r.Results[0].TurnID != "t101" || r.Results[0].Index != 1 || r.Searched != 2 {
		t.Fatalf("after an idle reset: %+v (searched %d), want t101 at index 1 of 2", r.Results, r.Searched)
	}
	cp := checkpointFrom(t, e, "s1", 1)
	if cp.Total != 2 {
		t.Fatalf("the processor's rules counted %d turns after the idle reset, want 2", cp.Total)
	}
	r = recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra hello"})
	if !slices.Equal(resultIndices(r), []int64{0}) || r.Results[0].TurnID != "t100" || r.Cursor != 1 {
		t.Fatalf("evicted after an idle reset: %+v, cursor %d", r.Results, r.Cursor)
	}
}

// long publishes n turns of session (turn 1234 mentions a zebra) and
// checkpoints the session with all but the newest 50 evicted.
func long(t testing.TB, e *servicetest.Env, session string, n int) {
	t.Helper()
	ctx := context.Background()
	words := []string{"ranked", "queue", "Tokyo", "Hulk", "Diamond", "Klyntar", "tournament", "stream", "wins", "dinner"}
	for i := range n {
		tu := testenv.Turn(session, i)
		tu.TurnID = fmt.Sprintf("t%05d", i)
		tu.Text = fmt.Sprintf("turn %d: talking about %s and %s again, %s.", i, words[i%10], words[(i/10)%10], words[(i/100)%10])
		if i == 1234 {
			tu.Text = "I saw a zebra on the Tokyo map."
		}
		data, _ := json.Marshal(tu)
		if _, err := e.JS.PublishAsync(e.Layout.Subjects.In(session, events.KindTurn), data, jetstream.WithStallWait(30*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.JS.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("publishes not acknowledged in 60s")
	}
	_ = ctx
	checkpointFrom(t, e, session, int64(n-50))
}

// A 10,000-turn session is scanned whole and answers in reasonable time
// (logged; BenchmarkRecall10k measures it).
func TestRecallScansALongSession(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	long(t, e, "s1", 10_000)
	started := time.Now()
	r := recall(t, e.NC, client.RecallRequest{Session: "s1", Query: "zebra Tokyo", Limit: 5})
	t.Logf("recall over 10k turns took %s", time.Since(started))
	if r.Searched != 9950 || r.Cursor != 9950 || len(r.Results) != 5 || r.Results[0].Index != 1234 || r.Results[0].TurnID != "t01234" {
		t.Fatalf("searched %d, cursor %d, results %v", r.Searched, r.Cursor, resultIndices(r))
	}
	for _, res := range r.Results[1:] {
		if res.Index >= 9950 || !strings.Contains(res.Text, "Tokyo") || res.Score > r.Results[0].Score {
			t.Fatalf("result %+v after the best one", res)
		}
	}
}

func BenchmarkRecall10k(b *testing.B) {
	e := servicetest.New(b, servicetest.Options{})
	e.StartService(nil)
	long(b, e, "s1", 10_000)
	for b.Loop() {
		r := recall(b, e.NC, client.RecallRequest{Session: "s1", Query: "zebra Tokyo", Limit: 5})
		if r.Searched != 9950 {
			b.Fatal(r.Searched)
		}
	}
}
