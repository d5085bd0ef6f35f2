package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// publish stores turns [from, to) of session on the inbound stream.
func publish(t *testing.T, e *servicetest.Env, session string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		publishTurn(t, e, testenv.Turn(session, i))
	}
}

func publishTurn(t *testing.T, e *servicetest.Env, turn events.Turn) {
	t.Helper()
	data, err := json.Marshal(turn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.JS.Publish(context.Background(), e.Layout.Subjects.In(turn.Session, events.KindTurn), data,
		jetstream.WithMsgID(turn.Session+":"+turn.TurnID)); err != nil {
		t.Fatal(err)
	}
}

func publishRaw(t *testing.T, e *servicetest.Env, subject string, v any) {
	t.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.JS.Publish(context.Background(), subject, data); err != nil {
		t.Fatal(err)
	}
}

// ask sends a raw request and returns the reply (errors in headers).
func ask(t *testing.T, nc *nats.Conn, endpoint string, req any) *nats.Msg {
	t.Helper()
	data, ok := req.([]byte)
	if !ok {
		data, _ = json.Marshal(req)
	}
	m, err := nc.Request(client.ServiceSubject("fold", endpoint), data, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", endpoint, err)
	}
	return m
}

func getContext(t *testing.T, nc *nats.Conn, req client.ContextRequest) *client.Context {
	t.Helper()
	m := ask(t, nc, client.EndpointContext, req)
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("context %+v: %s %s", req, code, m.Header.Get(micro.ErrorHeader))
	}
	var c client.Context
	if err := json.Unmarshal(m.Data, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// checkNoGap asserts the context's invariant: the summary covers exactly
// the turns before the cursor, the turns run from the cursor (plus what
// the budget dropped) to the newest turn without a hole, and the context
// never costs more than it says.
func checkNoGap(t fataler, c *client.Context) {
	t.Helper()
	if c.Summary != nil && c.Summary.CoveredThroughTurn != c.Cursor-1 {
		t.Fatalf("summary covers through %d but cursor is %d", c.Summary.CoveredThroughTurn, c.Cursor)
	}
	if c.Summary != nil && (len(c.Evictions) > 0 || c.EvictionDropped) {
		t.Fatalf("both a summary and an eviction note: the note takes the summary's place")
	}
	if c.Summary == nil && !c.SummaryDropped && len(c.Evictions) == 0 && !c.EvictionDropped && c.Cursor != 0 {
		t.Fatalf("cursor %d without a summary or an eviction note", c.Cursor)
	}
	want := c.Cursor + int64(c.DroppedTurns)
	for _, turn := range c.Turns {
		if turn.Index != want {
			t.Fatalf("turn index %d, want %d (gap or disorder) in %+v", turn.Index, want, indices(c))
		}
		if wantText := fmt.Sprintf("message number %03d ", turn.Index); !strings.HasPrefix(turn.Text, wantText) {
			t.Fatalf("turn %d has text %q", turn.Index, turn.Text)
		}
		want++
	}
	if want != c.TotalTurns {
		t.Fatalf("turns end at %d, total is %d", want, c.TotalTurns)
	}
	if n := utf8.RuneCountInString(c.Prompt()); n != c.Chars {
		t.Fatalf("prompt is %d chars, context says %d", n, c.Chars)
	}
}

func indices(c *client.Context) []int64 {
	var out []int64
	for _, t := range c.Turns {
		out = append(out, t.Index)
	}
	return out
}

// The layers come in prompt order, and a budget keeps the freshest
// turns first: the summary only gets the room the turns leave.
func TestContextBudgetKeepsFreshTurnsAndDropsSummaryFirst(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publish(t, e, "s1", 0, 64)
	e.Settled("s1", 64, 10)

	full := getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	checkNoGap(t, full)
	if full.Summary == nil || full.Summary.Version != 1 || !strings.HasPrefix(full.Summary.Text, "Earlier in this session: ") {
		t.Fatalf("summary layer %+v", full.Summary)
	}
	if len(full.Turns) != 54 || full.Turns[0].Index != 10 || full.DroppedTurns != 0 || full.Evictions == nil || len(full.Evictions) != 0 {
		t.Fatalf("unbudgeted context: %d turns from %v, dropped %d, evictions %v", len(full.Turns), indices(full)[:1], full.DroppedTurns, full.Evictions)
	}
	prompt := full.Prompt()
	if !strings.HasPrefix(prompt, full.Summary.Text+"\n") || !strings.HasSuffix(prompt, full.Turns[53].Line()+"\n") {
		t.Fatalf("prompt order: summary first, newest turn last:\n%s", prompt)
	}
	turnChars := 0
	for _, tu := range full.Turns {
		turnChars += tu.Chars
	}

	// Room for every turn but not the summary: the summary goes, no turn does.
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", BudgetChars: turnChars + full.Summary.Chars - 1})
	checkNoGap(t, c)
	if c.Summary != nil || !c.SummaryDropped || len(c.Turns) != 54 || c.DroppedTurns != 0 || c.Chars > c.BudgetChars {
		t.Fatalf("tight budget: summary %v dropped %v, %d turns, dropped turns %d, %d/%d chars",
			c.Summary != nil, c.SummaryDropped, len(c.Turns), c.DroppedTurns, c.Chars, c.BudgetChars)
	}
	// Exactly enough for both.
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", BudgetChars: turnChars + full.Summary.Chars})
	if c.Summary == nil || len(c.Turns) != 54 || c.Chars != c.BudgetChars {
		t.Fatalf("exact budget: summary %v, %d turns, %d/%d chars", c.Summary != nil, len(c.Turns), c.Chars, c.BudgetChars)
	}
	// Room for the five newest turns only: those five, newest last.
	five := 0
	for _, tu := range full.Turns[49:] {
		five += tu.Chars
	}
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", BudgetChars: five + 3})
	checkNoGap(t, c)
	if len(c.Turns) != 5 || c.Turns[0].Index != 59 || c.DroppedTurns != 49 || c.Summary != nil || !c.SummaryDropped {
		t.Fatalf("five-turn budget: turns %v, dropped %d, summary %v", indices(c), c.DroppedTurns, c.Summary != nil)
	}
	// A token budget works the same way, and both budgets hold together.
	tokens := 0
	for _, tu := range full.Turns[44:] {
		tokens += tu.Tokens
	}
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", BudgetTokens: tokens, BudgetChars: 1 << 20})
	checkNoGap(t, c)
	if len(c.Turns) != 10 || c.Tokens > tokens || c.Summary != nil {
		t.Fatalf("token budget %d: %d turns, %d tokens, summary %v", tokens, len(c.Turns), c.Tokens, c.Summary != nil)
	}
}

// While a fold is in flight, and at every moment while it lands, the
// context has every turn from the cursor on: the elastic window, read
// over and over by a concurrent builder.
func TestContextHasNoGapWhileAFoldIsInFlight(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	llm := servicetest.NewGatedLLM(t, e.Log)
	e.StartProcessor(processor.Config{}, llm.Summarizer)
	e.StartService(nil)
	nc, _ := e.Client("builder")

	publish(t, e, "s1", 0, 61)
	e.Eventually("fold in flight", func() bool { return llm.Calls() == 1 })
	publish(t, e, "s1", 61, 64)
	// The lease reaches the checkpoint with the shard's next write, a
	// moment after the model is called.
	var c *client.Context
	e.Eventually("the lease checkpointed", func() bool {
		c = getContext(t, nc, client.ContextRequest{Session: "s1"})
		checkNoGap(t, c)
		return c.FoldInFlight
	})
	if c.Cursor != 0 || len(c.Turns) != 64 || c.Summary != nil {
		t.Fatalf("during the fold: in flight %v, cursor %d, %d turns, summary %v", c.FoldInFlight, c.Cursor, len(c.Turns), c.Summary)
	}
	info := &client.SessionInfo{}
	if err := json.Unmarshal(ask(t, nc, client.EndpointSession, client.SessionRequest{Session: "s1"}).Data, info); err != nil {
		t.Fatal(err)
	}
	if info.Lease == nil || !info.Lease.Held || info.Lease.From != 0 || info.Lease.To != 10 || !info.Lease.Deadline.After(time.Now()) {
		t.Fatalf("session during the fold: lease %+v", info.Lease)
	}

	// A builder keeps asking while the fold lands and more turns arrive.
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		checked atomic.Int64
		failure atomic.Value
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			m, err := nc.Request(client.ServiceSubject("fold", client.EndpointContext), []byte(`{"session":"s1"}`), 10*time.Second)
			if err != nil {
				failure.Store(err.Error())
				return
			}
			var c client.Context
			if err := json.Unmarshal(m.Data, &c); err != nil {
				failure.Store(err.Error())
				return
			}
			ft := &fakeT{}
			func() {
				defer func() { _ = recover() }()
				checkNoGap(ft, &c)
			}()
			if ft.msg != "" {
				failure.Store(ft.msg)
				return
			}
			checked.Add(1)
		}
	}()
	llm.Release()
	publish(t, e, "s1", 64, 70)
	e.Settled("s1", 70, 10)
	e.Eventually("a few contexts checked after the fold", func() bool { return checked.Load() > 5 })
	stop.Store(true)
	wg.Wait()
	if f := failure.Load(); f != nil {
		t.Fatalf("a context read while the fold landed broke the invariant: %v", f)
	}
	c = getContext(t, nc, client.ContextRequest{Session: "s1"})
	checkNoGap(t, c)
	if c.FoldInFlight || c.Cursor != 10 || c.Summary == nil || !strings.Contains(c.Summary.Summary, "messages 000 to 009") || len(c.Turns) != 60 {
		t.Fatalf("after the fold: cursor %d, summary %+v, %d turns", c.Cursor, c.Summary, len(c.Turns))
	}
}

type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// fakeT lets checkNoGap run on another goroutine and report instead of
// failing the test from there.
type fakeT struct{ msg string }

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f.msg)
}

// Turns the stream accepted after the last checkpoint are in the context,
// applied as the processor would apply them: without any processor, with
// duplicates, invalid events, a reset and an end.
func TestContextIncludesTurnsAfterTheCheckpoint(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)

	// No processor has ever run: nothing is checkpointed, all is in the stream.
	publish(t, e, "s1", 0, 5)
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	checkNoGap(t, c)
	if c.TotalTurns != 5 || c.CheckpointSeq != 0 || c.ThroughSeq == 0 {
		t.Fatalf("before any checkpoint: %d turns, checkpoint seq %d, through %d", c.TotalTurns, c.CheckpointSeq, c.ThroughSeq)
	}

	_, stop := e.StartProcessor(processor.Config{}, nil)
	publish(t, e, "s1", 5, 64)
	e.Settled("s1", 64, 10)
	stop()

	// The processor is gone; the stream keeps accepting.
	publish(t, e, "s1", 64, 68)
	dup := testenv.Turn("s1", 66)
	dup.Text = "a re-send with the same turn id under another message id"
	data, _ := json.Marshal(dup)
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindTurn), data) // no Nats-Msg-Id: only turn_id dedup catches it
	bad := testenv.Turn("s1", 99)
	bad.Role = "narrator"
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindTurn), bad)
	publishRaw(t, e, e.Layout.Subjects.In("s1", "shout"), testenv.Turn("s1", 98))
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindNote), events.Note{V: 1, Session: "s1", NoteID: "n1", At: testenv.T0, Text: "Bob is sharing his screen"})
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	checkNoGap(t, c)
	if c.TotalTurns != 68 || c.Cursor != 10 || c.Summary == nil || c.CheckpointSeq >= c.ThroughSeq {
		t.Fatalf("after the checkpoint: total %d, cursor %d, summary %v, seqs %d..%d", c.TotalTurns, c.Cursor, c.Summary != nil, c.CheckpointSeq, c.ThroughSeq)
	}
	if last := c.Turns[len(c.Turns)-1]; last.Index != 67 || last.TurnID != "t067" {
		t.Fatalf("newest turn %+v", last)
	}

	// A reset in the tail starts the session again; an end stops it.
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpReset})
	publish(t, e, "s1", 100, 102)
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpEnd})
	publish(t, e, "s1", 102, 103) // rejected: the session has ended
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	if c.Summary != nil || c.Cursor != 0 || c.TotalTurns != 2 || !c.Ended || c.Turns[0].TurnID != "t100" || c.Turns[1].TurnID != "t101" {
		t.Fatalf("after reset and end: %+v", c)
	}

	// The restarted processor agrees with what the service predicted, then
	// ends the session: a final fold of the two turns,
	// archived, the checkpoint cleared to a tombstone.
	e.StartProcessor(processor.Config{}, nil)
	e.Eventually("the processor applied the tail and archived the ended session", func() bool {
		s := e.Checkpoint("s1")
		return s.LastSeq >= c.ThroughSeq && s.Archived
	})
	if s := e.Checkpoint("s1"); !s.Ended || s.Summary != "" || s.Total != 0 || s.Version != 2 {
		t.Fatalf("processor state after the tail: %+v", s)
	}
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	if !c.Ended || c.TotalTurns != 0 {
		t.Fatalf("context of the archived session: %+v", c)
	}
}

func TestErrorsHaveCodes(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	cases := []struct {
		endpoint string
		req      string
		code     string
		says     string
	}{
		{client.EndpointContext, `{"session":"nobody"}`, "404", "unknown session"},
		{client.EndpointSession, `{"session":"nobody"}`, "404", "unknown session"},
		{client.EndpointContext, `{"session":"a.b"}`, "400", "bad session id"},
		{client.EndpointSession, `{}`, "400", "bad session id"},
		{client.EndpointContext, `not json`, "400", "bad request"},
		{client.EndpointContext, `{"session":"s1","budget_chars":-1}`, "400", `"budget_chars"`},
		{client.EndpointContext, `{"session":"s1","budget_tokens":-5}`, "400", `"budget_tokens"`},
		// Past what the service's integers hold, or not a number: the field is named too.
		{client.EndpointContext, `{"session":"s1","budget_chars":1e20}`, "400", `field "budget_chars": expected a JSON integer of 64 bits, got number 1e20`},
		{client.EndpointContext, `{"session":"s1","budget_tokens":"100"}`, "400", `field "budget_tokens": expected a JSON integer of 64 bits, got string`},
		{client.EndpointRecall, `{"session":"s1","query":7}`, "400", `field "query": expected a JSON string, got number`},
	}
	for _, tc := range cases {
		m := ask(t, e.NC, tc.endpoint, []byte(tc.req))
		code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader)
		if code != tc.code || !strings.Contains(desc, tc.says) {
			t.Errorf("%s %s: got %q %q, want %s …%s…", tc.endpoint, tc.req, code, desc, tc.code, tc.says)
		}
	}
}

// The service is a NATS micro service: discoverable by name, with its
// endpoints, version and per-endpoint stats.
func TestServiceIsDiscoverableWithStats(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publish(t, e, "s1", 0, 3)
	e.Settled("s1", 3, 0)
	getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	getContext(t, e.NC, client.ContextRequest{Session: "s1", BudgetChars: 10})
	ask(t, e.NC, client.EndpointSession, client.SessionRequest{Session: "nobody"})

	nc, _ := e.Client("ops")
	subj, _ := micro.ControlSubject(micro.InfoVerb, client.ServiceName, "")
	m, err := nc.Request(subj, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("discovery %s: %v", subj, err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != "foldstream" || info.Version != service.Version || info.Description == "" || len(info.Endpoints) != 3 {
		t.Fatalf("info %+v", info)
	}
	subjects := map[string]bool{}
	for _, ep := range info.Endpoints {
		subjects[ep.Subject] = true
		if ep.Metadata["description"] == "" {
			t.Errorf("endpoint %s has no description", ep.Name)
		}
	}
	if !subjects["fold.svc.context"] || !subjects["fold.svc.session"] || !subjects["fold.svc.recall"] {
		t.Fatalf("endpoint subjects %v", subjects)
	}
	// micro counts a request after its handler returns, which is after the
	// reply went out: poll until the counts settle.
	subj, _ = micro.ControlSubject(micro.StatsVerb, client.ServiceName, info.ID)
	got := map[string][2]int{}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, err = nc.Request(subj, nil, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		var stats micro.Stats
		if err := json.Unmarshal(m.Data, &stats); err != nil {
			t.Fatal(err)
		}
		for _, ep := range stats.Endpoints {
			got[ep.Name] = [2]int{ep.NumRequests, ep.NumErrors}
		}
		if got["context"] == [2]int{2, 0} && got["session"] == [2]int{1, 1} {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("stats (requests, errors) %v, want context [2 0] and session [1 1]", got)
}

func TestSessionReportsTheCheckpoint(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	// The note is applied before turn 61 starts the fold, so it is folded.
	publish(t, e, "s1", 0, 60)
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindNote), events.Note{V: 1, Session: "s1", NoteID: "n1", At: testenv.T0, Text: "Bob is sharing Marvel Rivals"})
	publish(t, e, "s1", 60, 61)
	e.Settled("s1", 61, 10)
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindNote), events.Note{V: 1, Session: "s1", NoteID: "n2", At: testenv.T0, Text: "Carol joined the voice channel"})
	e.Eventually("note pending", func() bool { return len(e.Checkpoint("s1").PendingNotes) == 1 })
	var info client.SessionInfo
	m := ask(t, e.NC, client.EndpointSession, client.SessionRequest{Session: "s1"})
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Cursor != 10 || info.TotalTurns != 61 || info.Version != 1 || info.CoveredThroughTurn != 9 || info.Compactions != 1 ||
		info.LastFoldAt == nil || info.Lease != nil || info.PendingNotes != 1 || info.SummaryChars == 0 || info.LastSeq == 0 {
		t.Fatalf("session info %+v", info)
	}
}

// Mode evict: the eviction note is the context's eviction layer
// in the summary's place, before the turns, with the summary's priority:
// it only gets the room the turns leave.
func TestContextInModeEvictCarriesTheNoteInTheSummarysPlace(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	}, nil)
	e.StartService(nil)
	// 19 turns of 100 tokens pass 1800 (window − reserve): the oldest 9 go,
	// down to 1000 (50% of 2000).
	for i := range 20 {
		turn := testenv.Turn("ev", i)
		turn.Tokens = 100
		publishTurn(t, e, turn)
	}
	e.Settled("ev", 20, 9)

	full := getContext(t, e.NC, client.ContextRequest{Session: "ev"})
	checkNoGap(t, full)
	if full.Summary != nil || full.SummaryDropped || len(full.Evictions) != 1 || full.EvictionDropped {
		t.Fatalf("layers: summary %+v (dropped %v), evictions %+v (dropped %v)", full.Summary, full.SummaryDropped, full.Evictions, full.EvictionDropped)
	}
	note := full.Evictions[0]
	if note.Count != 9 || note.EvictedTokens != 900 || note.Version != 1 || !note.From.Equal(testenv.T0) ||
		!note.To.Equal(testenv.T0.Add(80*time.Second)) || !strings.HasPrefix(note.Text, "[Context rolled: 9 messages evicted (900 tokens).") ||
		note.Chars != utf8.RuneCountInString(note.Text)+1 || note.Tokens == 0 {
		t.Fatalf("eviction note %+v", note)
	}
	if len(full.Turns) != 11 || full.Turns[0].Index != 9 {
		t.Fatalf("turns %v, want 9..19", indices(full))
	}
	if prompt := full.Prompt(); !strings.HasPrefix(prompt, note.Text+"\n"+full.Turns[0].Line()+"\n") {
		t.Fatalf("prompt order: the note first, in the summary's place:\n%s", prompt)
	}

	// Room for every turn but not the note: the note goes, no turn does.
	turnChars := full.Chars - note.Chars
	c := getContext(t, e.NC, client.ContextRequest{Session: "ev", BudgetChars: full.Chars - 1})
	checkNoGap(t, c)
	if len(c.Evictions) != 0 || !c.EvictionDropped || len(c.Turns) != 11 || c.Chars != turnChars {
		t.Fatalf("tight budget: evictions %+v dropped %v, %d turns, %d chars", c.Evictions, c.EvictionDropped, len(c.Turns), c.Chars)
	}

	var info client.SessionInfo
	m := ask(t, e.NC, client.EndpointSession, client.SessionRequest{Session: "ev"})
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if !info.SummaryIsNote || info.Evicted != 9 || info.EvictedTokens != 900 || info.Cursor != 9 {
		t.Fatalf("session info %+v", info)
	}
}

// The session reply says whether the processor has caught up: applied
// (checkpointed) sequence against the session's newest in the stream.
// Events the processor will apply count as pending; a rejected event or a
// duplicate turn does not leave the session looking behind.
func TestSessionSaysWhetherTheProcessorCaughtUp(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	_, stop := e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	session := func() client.SessionInfo {
		t.Helper()
		var info client.SessionInfo
		m := ask(t, e.NC, client.EndpointSession, client.SessionRequest{Session: "s1"})
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
			t.Fatalf("session: %s %s", code, m.Header.Get(micro.ErrorHeader))
		}
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatal(err)
		}
		return info
	}
	publish(t, e, "s1", 0, 5)
	e.Settled("s1", 5, 0)
	var info client.SessionInfo
	e.Eventually("caught up after 5 turns", func() bool { info = session(); return info.CaughtUp })
	if info.AppliedSeq != info.StreamLastSeq || info.AppliedSeq != info.LastSeq || info.PendingEvents != 0 || info.StreamLastSeq == 0 {
		t.Fatalf("caught up: %+v", info)
	}

	stop()
	publish(t, e, "s1", 5, 8)
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindTurn), testenv.Turn("s1", 2)) // a duplicate turn id, no message id
	publishRaw(t, e, e.Layout.Subjects.In("s1", events.KindTurn), []byte(`{"v":1,"session":"s1"`))
	info = session()
	if info.CaughtUp || info.PendingEvents != 3 || info.StreamLastSeq <= info.AppliedSeq {
		t.Fatalf("processor stopped, 3 new turns, a duplicate and a bad event: %+v", info)
	}

	e.StartProcessor(processor.Config{}, nil)
	e.Settled("s1", 8, 0)
	e.Eventually("caught up again", func() bool { info = session(); return info.CaughtUp })
	if info.PendingEvents != 0 || info.StreamLastSeq == 0 {
		t.Fatalf("caught up again: %+v", info)
	}
}
