package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func TestConversationDeterministicAndValid(t *testing.T) {
	a, b := Conversation(7, 150), Conversation(7, 150)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different conversations")
	}
	if reflect.DeepEqual(a, Conversation(8, 150)) {
		t.Error("different seeds, same conversation")
	}
	if len(a) != 150 {
		t.Fatalf("got %d turns, want 150", len(a))
	}
	for _, n := range []int{0, 1, 10, 39, 40, 61, 64, 110, 400} {
		if got := len(Conversation(3, n)); got != n {
			t.Errorf("Conversation(3, %d) has %d turns", n, got)
		}
	}

	fillerSet := map[string]bool{}
	for _, f := range fillers {
		fillerSet[f] = true
	}
	ids := map[string]bool{}
	speakers := map[string]bool{}
	var nFiller, nSubstantive, nBot int
	all := ""
	for i, turn := range a {
		if turn.Session != "" {
			t.Fatalf("turn %d has a session; Run sets it", i)
		}
		turn.Session = "s1"
		if err := turn.Validate("s1", events.Limits{}); err != nil {
			t.Fatalf("turn %d invalid: %v", i, err)
		}
		if ids[turn.TurnID] {
			t.Fatalf("turn id %s repeats", turn.TurnID)
		}
		ids[turn.TurnID] = true
		if i > 0 {
			gap := turn.At.Sub(a[i-1].At)
			if gap < 7*time.Second || gap > 13*time.Second {
				t.Errorf("turn %d is %s after the previous one, want about 10s", i, gap)
			}
		}
		if strings.Contains(turn.Text, "{") {
			t.Errorf("unfilled placeholder in %q", turn.Text)
		}
		speakers[turn.Speaker] = true
		switch {
		case turn.Role == "assistant":
			nBot++
		case fillerSet[turn.Text]:
			nFiller++
		default:
			nSubstantive++
		}
		all += turn.Text + "\n"
	}
	if len(speakers) != 5 || nBot == 0 || nFiller < 10 || nSubstantive < 80 {
		t.Errorf("speakers %v, bot %d, filler %d, substantive %d", speakers, nBot, nFiller, nSubstantive)
	}
	c := newCast(7)
	for _, want := range []string{c.game.name, c.game.maps[0], c.trip.place, c.date, "decided", "who's bringing the grill?", "8 am"} {
		if !strings.Contains(all, want) {
			t.Errorf("conversation never mentions %q", want)
		}
	}

	notes := Notes(7)
	if len(notes) == 0 || !reflect.DeepEqual(notes, Notes(7)) {
		t.Fatal("notes missing or not deterministic")
	}
	for i, n := range notes {
		n.Session = "s1"
		if err := n.Validate("s1", events.Limits{}); err != nil {
			t.Errorf("note %d invalid: %v", i, err)
		}
		if n.At.Before(a[0].At) || n.At.After(a[len(a)-1].At) {
			t.Errorf("note %d at %s is outside the conversation", i, n.At)
		}
	}
}

func TestExpectedSummaries(t *testing.T) {
	for _, c := range []struct{ turns, want int }{{0, 0}, {60, 0}, {61, 1}, {70, 1}, {71, 2}, {110, 5}, {111, 6}} {
		if got := ExpectedSummaries(c.turns, 50, 10); got != c.want {
			t.Errorf("ExpectedSummaries(%d) = %d, want %d", c.turns, got, c.want)
		}
	}
}

type env struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	subj events.Subjects
	ctx  context.Context
}

func newEnv(t *testing.T) env {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options{Name: "demo-test"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return env{nc: b.NC, js: b.JS, subj: b.Layout.Subjects, ctx: ctx}
}

// fakeProcessor stands in for the processor: it counts distinct turns of
// session and, window mode style, publishes a summary at 61, 71, 81, …
type fakeProcessor struct {
	mu    sync.Mutex
	turns map[string]bool
	notes int
}

// startFake starts the fake; summaryFirst publishes each summary before
// the compaction_started of its fold, as the real processor's two
// connections (ingest and folds) can deliver them.
func startFake(t *testing.T, e env, session string, summaryFirst bool) *fakeProcessor {
	t.Helper()
	f := &fakeProcessor{turns: map[string]bool{}}
	pub := func(kind string, v any) {
		data, _ := json.Marshal(v)
		if err := e.nc.Publish(e.subj.Out(session, kind), data); err != nil {
			t.Errorf("fake publish: %v", err)
		}
	}
	sub, err := e.nc.Subscribe(e.subj.InSession(session), func(m *nats.Msg) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if strings.HasSuffix(m.Subject, ".note") {
			f.notes++
			return
		}
		var turn events.Turn
		if err := json.Unmarshal(m.Data, &turn); err != nil || turn.Session != session || m.Header.Get(jetstream.MsgIDHeader) != turn.TurnID {
			t.Errorf("fake got a bad turn: %s %v", m.Data, err)
			return
		}
		if f.turns[turn.TurnID] {
			return
		}
		f.turns[turn.TurnID] = true
		total := int64(len(f.turns))
		if total < 61 || (total-61)%10 != 0 {
			return
		}
		from := (total - 61)
		version := uint64(total-61)/10 + 1
		started := events.Lifecycle{V: 1, Session: session, Type: events.EventCompactionStarted, Trigger: "turn", BatchFrom: from, BatchTo: from + 9, TotalTurns: total}
		summary := events.SummaryUpdated{V: 1, Session: session, Version: version, Cursor: from + 10, CoveredThroughTurn: from + 9,
			FoldedTurns: 10, Tier: "full", Model: "fake", Summary: fmt.Sprintf("Fake summary %d.\nSecond line.", version), SummaryChars: 30}
		completed := events.Lifecycle{V: 1, Session: session, Type: events.EventCompactionCompleted, OldCursor: from, NewCursor: from + 10, Version: version, Tier: "full"}
		if summaryFirst {
			pub(events.KindSummary, summary)
			pub(events.KindEvent, completed)
			pub(events.KindEvent, started)
			return
		}
		pub(events.KindEvent, started)
		pub(events.KindSummary, summary)
		pub(events.KindEvent, completed)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRunReceivesSummaries(t *testing.T) {
	e := newEnv(t)
	f := startFake(t, e, "demo1", false)
	var out bytes.Buffer
	cfg := Config{Session: "demo1", Turns: 75, Interval: time.Millisecond, Seed: 42, Notes: true, WaitSummaries: 10 * time.Second}
	if err := Run(e.ctx, e.nc, e.js, e.subj, cfg, &out, zerolog.Nop()); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("demo output (tail):\n%s", tail(text, 25))
	for _, want := range []string{
		"expecting 2 summaries",
		"== summary v1: turns 0..9 folded (10 turns, 0 notes), cursor 10, tier full, model fake",
		"   | Fake summary 1.",
		"   | Second line.",
		"== summary v2: turns 10..19 folded",
		"-- fold started: turns 0..9",
		"[note] ",
		"demo: done, 75 turns and 4 notes published, 2 summaries received",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Run may return before the fake's callback has seen the last turn.
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		nt, nn := len(f.turns), f.notes
		f.mu.Unlock()
		if nt == 75 && nn == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake saw %d turns, %d notes; want 75 and 4", nt, nn)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The turns are on the stream, with the turn id as Nats-Msg-Id.
	s, err := e.js.Stream(e.ctx, "FOLD_IN")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(e.ctx, e.subj.In("demo1", events.KindTurn))
	if err != nil {
		t.Fatal(err)
	}
	var last events.Turn
	if err := json.Unmarshal(m.Data, &last); err != nil {
		t.Fatal(err)
	}
	if last.TurnID != "demo1-t0074" || m.Header.Get(jetstream.MsgIDHeader) != last.TurnID {
		t.Errorf("last turn %s, msg id %q", last.TurnID, m.Header.Get(jetstream.MsgIDHeader))
	}

	// Running the same session again finds its turns already there.
	err = Run(e.ctx, e.nc, e.js, e.subj, cfg, &bytes.Buffer{}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "already has this conversation") {
		t.Errorf("second run: %v", err)
	}
}

func TestRunTimesOutWithoutProcessor(t *testing.T) {
	e := newEnv(t)
	var out bytes.Buffer
	cfg := Config{Session: "lonely", Turns: 61, WaitSummaries: 200 * time.Millisecond}
	err := Run(e.ctx, e.nc, e.js, e.subj, cfg, &out, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "got 0 of 1 summaries") || !strings.Contains(err.Error(), `prefix "fold"`) {
		t.Fatalf("want a timeout error, got %v", err)
	}
	if !strings.Contains(out.String(), "waited 200ms after the last turn") {
		t.Errorf("output:\n%s", tail(out.String(), 5))
	}
}

func TestRunStopsWithContext(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
	defer cancel()
	err := Run(ctx, e.nc, e.js, e.subj, Config{Session: "slow", Turns: 100, Interval: time.Hour}, &bytes.Buffer{}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("want interrupted, got %v", err)
	}
}

func TestRunRejectsBadSession(t *testing.T) {
	e := newEnv(t)
	err := Run(e.ctx, e.nc, e.js, e.subj, Config{Session: "a.b"}, &bytes.Buffer{}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "[A-Za-z0-9_-]") {
		t.Fatalf("got %v", err)
	}
}

func TestRebaseKeepsOrderAndIDsUnique(t *testing.T) {
	turns := Conversation(1, 70)
	notes := Notes(1)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rebase(turns, notes, "s9", now)
	if !turns[len(turns)-1].At.Equal(now) || turns[0].TurnID != "s9-t0000" || turns[0].Session != "s9" || notes[0].Session != "s9" {
		t.Fatalf("rebase: %+v / %+v", turns[0], notes[0])
	}
	if !slices.IsSortedFunc(turns, func(a, b events.Turn) int { return a.At.Compare(b.At) }) {
		t.Error("turns out of order after rebase")
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// A summary that arrives before the compaction_started of its fold (and
// the fold's completion before both) is printed after it: the output tells
// the story in causal order.
func TestRunPrintsInCausalOrder(t *testing.T) {
	e := newEnv(t)
	startFake(t, e, "demo2", true)
	var out bytes.Buffer
	cfg := Config{Session: "demo2", Turns: 72, Interval: 0, Seed: 42, WaitSummaries: 10 * time.Second}
	if err := Run(e.ctx, e.nc, e.js, e.subj, cfg, &out, zerolog.Nop()); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	text := out.String()
	for v, lines := range [][]string{
		{"-- fold started: turns 0..9", "== summary v1:", "-- fold completed: cursor 0 -> 10, v1"},
		{"-- fold started: turns 10..19", "== summary v2:", "-- fold completed: cursor 10 -> 20, v2"},
	} {
		at := -1
		for _, l := range lines {
			i := strings.Index(text, l)
			if i < 0 {
				t.Fatalf("fold %d: output lacks %q:\n%s", v+1, l, text)
			}
			if i < at {
				t.Errorf("fold %d: %q printed before the line that caused it:\n%s", v+1, l, tail(text, 30))
			}
			at = i
		}
	}
}
