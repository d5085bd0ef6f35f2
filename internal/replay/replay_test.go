package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type harness struct {
	t   *testing.T
	ctx context.Context
	js  jetstream.JetStream
	l   broker.Layout
	at  time.Time
}

// newHarness starts a real in-process nats-server with foldstream's streams.
func newHarness(t *testing.T) *harness {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options{Name: "replay-test"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	js, l := b.JS, b.Layout
	return &harness{t: t, ctx: ctx, js: js, l: l, at: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
}

func (h *harness) publish(subject string, v any, hdr nats.Header) {
	h.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		h.t.Fatal(err)
	}
	h.publishRaw(subject, data, hdr)
}

func (h *harness) publishRaw(subject string, data []byte, hdr nats.Header) {
	h.t.Helper()
	if _, err := h.js.PublishMsg(h.ctx, &nats.Msg{Subject: subject, Data: data, Header: hdr}); err != nil {
		h.t.Fatalf("publish %s: %v", subject, err)
	}
}

func (h *harness) turn(session, id, speaker, text string) {
	h.at = h.at.Add(10 * time.Second)
	h.publish(h.l.Subjects.In(session, events.KindTurn), events.Turn{
		V: 1, Session: session, TurnID: id, At: h.at, Speaker: speaker, Role: "user", Text: text,
	}, nil)
}

func (h *harness) summary(session string, version uint64, cursor int64) {
	h.publish(h.l.Subjects.Out(session, events.KindSummary), events.SummaryUpdated{
		V: 1, Session: session, Version: version, Summary: fmt.Sprintf("Alice and Bob planned the trip (v%d).", version),
		Cursor: cursor, CoveredThroughTurn: cursor - 1, FoldedTurns: 2, SummaryChars: 812,
		Mode: "window", Tier: "full", Model: "offline", LatencyMS: 3, At: h.at,
	}, nil)
}

func (h *harness) lifecycle(session string, lc events.Lifecycle) {
	lc.V, lc.Session, lc.At = 1, session, h.at
	h.publish(h.l.Subjects.Out(session, events.KindEvent), lc, nil)
}

func (h *harness) load(session string) *Timeline {
	h.t.Helper()
	tl, err := Load(h.ctx, h.js, h.l, session)
	if err != nil {
		h.t.Fatalf("Load(%s): %v", session, err)
	}
	return tl
}

func TestLoadMergesOneSession(t *testing.T) {
	h := newHarness(t)
	s := h.l.Subjects

	h.turn("s1", "t0", "Alice", "hey, can everyone hear me?")
	h.turn("s2", "x0", "Zed", "noise from another session")
	h.turn("s1", "t1", "Bob", "yep. "+strings.Repeat("long line ", 30))
	// The same turn_id again, without Nats-Msg-Id so the stream keeps it:
	// replay must number it as turn 1 and mark it a duplicate.
	h.turn("s1", "t1", "Bob", "yep (resent)")
	h.publish(s.In("s1", events.KindNote), events.Note{V: 1, Session: "s1", NoteID: "n0", At: h.at, Source: "screen", Text: "Alice shares the cabin listing"}, nil)
	h.turn("s1", "t2", "Alice", "let's try the new team comp")
	h.lifecycle("s1", events.Lifecycle{Type: events.EventCompactionSkipped, Reason: events.SkipAlreadyInFlight, Cursor: 0, TotalTurns: 64})
	h.lifecycle("s1", events.Lifecycle{Type: events.EventCompactionStarted, FoldID: "f1", Trigger: "turn", BatchFrom: 0, BatchTo: 1, TotalTurns: 3})
	h.summary("s1", 1, 2)
	h.lifecycle("s1", events.Lifecycle{Type: events.EventCompactionCompleted, FoldID: "f1", OldCursor: 0, NewCursor: 2, Version: 1, Tier: "full", SummaryChars: 812})
	h.summary("s2", 1, 10)
	// A bad turn: kept on the inbound stream, dead-lettered by the processor.
	bad := []byte(`{"v":1,"session":"s1","at":"2026-01-02T15:10:00Z","speaker":"Bob","role":"user","text":"no id"}`)
	h.publishRaw(s.In("s1", events.KindTurn), bad, nil)
	dl := nats.Header{}
	dl.Set(events.HeaderErrorCode, events.CodeMissingField)
	dl.Set(events.HeaderErrorField, "turn_id")
	dl.Set(events.HeaderError, `field "turn_id": required, expected a non-empty string (the idempotency key)`)
	dl.Set(events.HeaderOriginalSubject, s.In("s1", events.KindTurn))
	dl.Set(events.HeaderOriginalSeq, "9")
	h.publishRaw(s.DeadLetter("s1"), bad, dl)
	h.publishRaw(s.DeadLetter("s2"), []byte(`{}`), nil)
	h.turn("s1", "t3", "Carol", "haha")
	h.summary("s1", 2, 4)

	tl := h.load("s1")
	var kinds []string
	for _, e := range tl.Entries {
		if strings.Contains(e.Subject, ".s2.") || strings.HasSuffix(e.Subject, ".s2") {
			t.Errorf("entry of another session: %+v", e)
		}
		kinds = append(kinds, e.Kind)
	}
	want := []string{"turn", "turn", "turn", "note", "turn", "compaction_skipped", "compaction_started", "summary",
		"compaction_completed", "turn", "rejected", "turn", "summary"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("kinds\n got %v\nwant %v", kinds, want)
	}
	for i := 1; i < len(tl.Entries); i++ {
		if tl.Entries[i].Time.Before(tl.Entries[i-1].Time) {
			t.Errorf("entry %d is before entry %d", i, i-1)
		}
	}
	dup := tl.Entries[2].Turn
	if dup == nil || !dup.Duplicate || dup.Index != 1 || tl.Entries[1].Turn.Duplicate {
		t.Errorf("duplicate turn: %+v", dup)
	}
	if got := tl.Entries[11].Turn; got.Index != 3 || got.Speaker != "Carol" {
		t.Errorf("last turn %+v, want index 3 by Carol", got)
	}
	if tl.Entries[9].Invalid == "" {
		t.Errorf("the turn without turn_id should be marked invalid")
	}
	rj := tl.Entries[10].Rejected
	if rj == nil || rj.Code != events.CodeMissingField || rj.Field != "turn_id" || rj.OriginalSeq != "9" {
		t.Errorf("rejected %+v", rj)
	}
	if sm := tl.Entries[7].Summary; sm.Version != 1 || sm.Cursor != 2 || sm.FoldedFrom != 0 || sm.Tier != "full" {
		t.Errorf("summary %+v", sm)
	}

	tt := tl.Totals
	if tt.Turns != 4 || tt.DuplicateTurns != 1 || tt.InvalidInbound != 1 || tt.Notes != 1 || tt.DeadLetters != 1 ||
		tt.FoldsStarted != 1 || tt.FoldsCompleted != 1 || tt.FoldsFailed != 0 || tt.Skips[events.SkipAlreadyInFlight] != 1 ||
		fmt.Sprint(tt.SummaryVersions) != "[1 2]" || tt.Cursor != 4 || len(tt.Warnings) != 0 || tt.Incomplete || tt.Entries != 13 {
		t.Errorf("totals %+v", tt)
	}

	var text bytes.Buffer
	if err := tl.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	t.Logf("text timeline:\n%s", out)
	for _, want := range []string{
		"session s1: 13 events (FOLD_IN 7, FOLD_OUT 5, FOLD_DLQ 1)",
		"turn      #0    Alice (user): hey, can everyone hear me?",
		"turn      #1    Bob (user): yep (resent)  [duplicate turn_id t1, not counted]",
		"note      [screen] Alice shares the cabin listing",
		"skip      already_in_flight (cursor 0, total 64)",
		"start     fold f1 [0..1] trigger turn",
		"fold      v1 [0..1] → cursor 2, 812 chars, tier full, model offline, 3ms: Alice and Bob planned the trip (v1).",
		"done      fold f1 cursor 0 → 2, v1, 812 chars, tier full",
		`REJECTED  missing_field: field "turn_id": required`,
		"(from fold.in.s1.turn seq 9)",
		"totals: 4 turns (1 duplicate), 1 notes, 1 invalid inbound, 1 rejected; folds 1 started, 1 completed, 0 failed; skips already_in_flight=1; summary versions 1,2; cursor 4",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	if strings.Contains(out, strings.Repeat("long line ", 20)) || !strings.Contains(out, "…") {
		t.Errorf("long turn text should be cut without showText")
	}
	if strings.Count(out, "\n") != len(tl.Entries)+2 {
		t.Errorf("want one line per entry plus header and totals, got %d lines", strings.Count(out, "\n"))
	}
	text.Reset()
	if err := tl.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), strings.TrimSpace(strings.Repeat("long line ", 30))) {
		t.Errorf("showText should print the whole turn")
	}

	var js bytes.Buffer
	if err := tl.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != len(tl.Entries)+1 {
		t.Fatalf("JSON lines: got %d, want %d", len(lines), len(tl.Entries)+1)
	}
	var first struct {
		Kind, Stream string
		Seq          uint64
		Turn         struct {
			Index   int64
			Speaker string
			Text    string
		}
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Kind != "turn" || first.Stream != "FOLD_IN" || first.Seq != 1 || first.Turn.Speaker != "Alice" || first.Turn.Index != 0 {
		t.Errorf("first JSON line %s", lines[0])
	}
	if !strings.Contains(lines[2], `"duplicate":true`) {
		t.Errorf("duplicate not marked in JSON: %s", lines[2])
	}
	var last Totals
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Kind != "totals" || last.Turns != 4 || last.DuplicateTurns != 1 || fmt.Sprint(last.SummaryVersions) != "[1 2]" {
		t.Errorf("totals line %s", lines[len(lines)-1])
	}
}

func TestRepeatedVersionWarns(t *testing.T) {
	h := newHarness(t)
	h.turn("s3", "t0", "Alice", "hi")
	h.summary("s3", 1, 10)
	h.summary("s3", 1, 10)
	tl := h.load("s3")
	if len(tl.Totals.Warnings) != 1 || !strings.Contains(tl.Totals.Warnings[0], "version 1 repeats") {
		t.Fatalf("warnings %q", tl.Totals.Warnings)
	}
	if n := len(tl.Entries); n != 4 || tl.Entries[3].Kind != KindWarning {
		t.Fatalf("want the warning entry right after the second summary, got %+v", tl.Entries)
	}
	var text bytes.Buffer
	if err := tl.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "WARNING   summary version 1 repeats") || !strings.Contains(text.String(), "1 WARNING(S)") {
		t.Errorf("text output:\n%s", text.String())
	}

	// Versions going backwards and gaps are flagged too; a reset restarts.
	h.summary("s4", 2, 10)
	h.summary("s4", 4, 20)
	h.summary("s4", 3, 30)
	h.lifecycle("s4", events.Lifecycle{Type: events.EventSessionReset})
	h.summary("s4", 1, 10)
	tl = h.load("s4")
	if w := tl.Totals.Warnings; len(w) != 2 || !strings.Contains(w[0], "jumps from 2 to 4") || !strings.Contains(w[1], "version 3 after version 4") {
		t.Fatalf("warnings %q", w)
	}
}

func TestInvalidAndUnknownSession(t *testing.T) {
	h := newHarness(t)
	_, err := Load(h.ctx, h.js, h.l, "bad.session")
	if err == nil || !strings.Contains(err.Error(), "[A-Za-z0-9_-]") {
		t.Fatalf("want a clear session error, got %v", err)
	}
	if ve, ok := events.AsValidation(err); !ok || ve.Code != events.CodeBadSession {
		t.Errorf("want a wrapped *ValidationError, got %T", err)
	}
	if _, err := Load(h.ctx, h.js, h.l, ""); err == nil {
		t.Fatal("empty session accepted")
	}

	h.turn("other", "t0", "Alice", "hi")
	tl := h.load("ghost")
	if len(tl.Entries) != 0 || tl.Totals.Entries != 0 {
		t.Fatalf("unknown session has entries: %+v", tl.Entries)
	}
	var text bytes.Buffer
	if err := tl.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	if got := text.String(); got != "no events for session \"ghost\" in FOLD_IN, FOLD_OUT or FOLD_DLQ\n" {
		t.Errorf("text %q", got)
	}
	var js bytes.Buffer
	if err := tl.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(js.String(), `{"kind":"totals","session":"ghost"`) || strings.Count(js.String(), "\n") != 1 {
		t.Errorf("JSON %q", js.String())
	}
}

func TestMissingStream(t *testing.T) {
	h := newHarness(t)
	subj, _ := events.NewSubjects("other")
	_, err := Load(h.ctx, h.js, broker.NewLayout(subj), "s1")
	if err == nil || !strings.Contains(err.Error(), "OTHER_IN not found") {
		t.Fatalf("want stream not found, got %v", err)
	}
}

// A live stream: publishing continues while Load runs, and Load still ends.
func TestLoadTerminatesOnLiveStream(t *testing.T) {
	h := newHarness(t)
	for i := range 50 {
		h.turn("live", fmt.Sprintf("t%d", i), "Alice", "warm-up")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 50; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data, _ := json.Marshal(events.Turn{V: 1, Session: "live", TurnID: fmt.Sprintf("t%d", i), At: time.Now(), Speaker: "Bob", Role: "user", Text: "more"})
			if _, err := h.js.Publish(h.ctx, h.l.Subjects.In("live", events.KindTurn), data); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	tl := h.load("live")
	if tl.Totals.Turns < 50 {
		t.Fatalf("got %d turns, want at least the 50 present before", tl.Totals.Turns)
	}
}
