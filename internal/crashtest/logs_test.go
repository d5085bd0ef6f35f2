package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNoTranscriptInLogs runs the processor binary at the default log
// level (info) over a session whose turns, notes, rejected events and
// summaries all carry a unique marker, through a failed fold, successful
// folds and dead letters, and checks that the marker never reaches the
// logs. At debug it must appear (the check can see it).
func TestNoTranscriptInLogs(t *testing.T) {
	w := newWorld(t, 7, 0)
	defer w.dumpLogs()
	ctx := context.Background()
	marker := fmt.Sprintf("MARKER%016x", rand.Uint64())
	const session = "logs"
	// First fold: a refusal quoting the transcript (a failed fold, logged
	// at warn). Then summaries that quote it too.
	w.model.SetFault(func(c Call) *openaitest.Reply {
		if c.N == 0 {
			r := openaitest.OK("I'm sorry, I cannot repeat " + marker)
			return &r
		}
		r := openaitest.OK(SummaryText(c.Session, c.Numbers) + " Alice mentioned " + marker + ".")
		return &r
	})
	subj := w.env.Layout.Subjects
	turn := func(n int) {
		tr := Turn(session, n)
		tr.Text += ": the code word is " + marker
		if n == 1 {
			tr.Speaker = "Alice " + marker
		}
		pub(t, w.js, subj.In(session, events.KindTurn), tr, tr.TurnID)
	}
	bad := [][]byte{
		[]byte(`{"v":1,"session":"logs","turn_id":"b1","at":"2026-11-22T20:00:00Z","speaker":"A","role":"user","text":"` + marker + "\xff\"}"),
		[]byte(`{"v":1,"session":"logs","turn_id":"b2","at":"2026-11-22T20:00:00Z","role":"user","text":"` + marker + `"}`),
		[]byte(`{"v":1,"session":"logs","turn_id":"b3","at":"2026-11-22T20:00:00Z","speaker":"A","role":"user","text":"` + marker + strings.Repeat("x", 70<<10) + `"}`),
		[]byte(`{"v":1,"session":"logs","text":"` + marker),
	}

	c := w.start("--recent-window", "2", "--batch-size", "2")
	if !w.waitReady(c) {
		t.Fatalf("processor did not start: %v\n%s", c.err, tail(w.logText(), 20))
	}
	for n := range 6 {
		turn(n)
	}
	pub(t, w.js, subj.In(session, events.KindNote), events.Note{V: 1, Session: session, NoteID: "n1", At: T0, Source: "Bob", Text: "Bob shares " + marker}, "n1")
	for _, b := range bad {
		pub(t, w.js, subj.In(session, events.KindTurn), b, "")
	}
	brokertest.Eventually(t, "the refused fold", func() bool { return len(w.model.Calls()) >= 1 })
	// The retry backoff after a failed fold is 2s; turns keep coming.
	next := 6
	brokertest.Eventually(t, "two summaries", func() bool {
		turn(next)
		next++
		sums, err := Summaries(ctx, w.env, session)
		return err == nil && len(sums) >= 2
	})
	brokertest.Eventually(t, "dead letters", func() bool {
		msgs, err := testenv.ReadSubject(ctx, w.js, w.env.Layout.DLQ, subj.DeadLetter(session))
		return err == nil && len(msgs) == len(bad)
	})
	if err := c.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	info := w.logText()

	// The marker went through the processor: to the model and into the
	// published summaries.
	if calls := w.model.Calls(); !strings.Contains(calls[len(calls)-1].Request.Content(), marker) {
		t.Fatal("the model never saw the marker")
	}
	if sums, _ := Summaries(ctx, w.env, session); !strings.Contains(sums[0].Summary, marker) {
		t.Fatal("the summary does not carry the marker")
	}
	for _, ev := range []string{"context_compaction_failed", "context_compaction_completed", "event_rejected"} {
		if !strings.Contains(info, `"event":"`+ev+`"`) {
			t.Errorf("no %s in the logs: the test did not exercise that path", ev)
		}
	}
	if i := strings.Index(info, marker); i >= 0 {
		t.Fatalf("transcript text in the info-level logs: %s", info[max(0, strings.LastIndex(info[:i], "\n")):min(len(info), i+200)])
	}

	// Positive control: at debug the same text is logged.
	c = w.start("--recent-window", "2", "--batch-size", "2", "--log-level", "debug")
	if !w.waitReady(c) {
		t.Fatalf("processor did not start: %v", c.err)
	}
	before, _ := Summaries(ctx, w.env, session)
	brokertest.Eventually(t, "a summary at debug", func() bool {
		turn(next)
		next++
		sums, err := Summaries(ctx, w.env, session)
		return err == nil && len(sums) > len(before)
	})
	if err := c.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if debug := strings.TrimPrefix(w.logText(), info); !strings.Contains(debug, marker) {
		t.Fatal("the marker is not in the debug logs either: the check cannot see transcript text")
	}
}

func pub(t *testing.T, js jetstream.JetStream, subject string, v any, msgID string) {
	t.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, subject, data, opts...); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
}
