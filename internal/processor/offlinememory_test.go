package processor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/foldstream/foldstream/internal/testlog"
)

// The offline summarizer's memories reach fold.out.<s>.memory with their
// items: speaker, turn id and time of the turn that stated each.
func TestOfflineMemoriesPublishedWithItems(t *testing.T) {
	r := newRig(t)
	r.sum = offline.New()
	r.start(Config{})
	const session = "offmem"
	for i := range 71 {
		sp, text := "Bob", fmt.Sprintf("ok %d", i)
		if i == 3 {
			sp, text = "Alice", "I moved from Sweden two years ago, and I start at Siemens on the 3rd."
		}
		id := fmt.Sprintf("%s-t%03d", session, i)
		r.Publish(r.Layout.Subjects.In(session, events.KindTurn), events.Turn{
			V: 1, Session: session, TurnID: id, At: t0.Add(time.Duration(i) * 10 * time.Second),
			Speaker: sp, Role: "user", Text: text,
		}, id)
	}
	r.Settled(session, 71, 20)
	var got []events.Memories
	r.Eventually("a memory event", func() bool { got = decodeAll[events.Memories](r, session, events.KindMemory); return len(got) >= 1 })
	ev := got[0]
	if len(ev.Items) != len(ev.Memories) || len(ev.Items) == 0 {
		t.Fatalf("memory event without one item per memory: %+v", ev)
	}
	it := ev.Items[0]
	if it.Speaker != "Alice" || it.TurnID != session+"-t003" || !it.At.Equal(t0.Add(30*time.Second)) || it.ID == "" ||
		it.Text != ev.Memories[0] || ev.Model != offline.Model {
		t.Fatalf("item %+v of event %+v: want Alice's turn 3", it, ev)
	}
}

// stateLoser is the offline summarizer, except that the state of the
// session's first fold comes back as a newer version would write it, one
// this version cannot read; it records every call.
type stateLoser struct {
	*offline.Summarizer
	mu    sync.Mutex
	calls []fold.Request
}

func (l *stateLoser) Summarize(ctx context.Context, req fold.Request) (fold.Result, error) {
	l.mu.Lock()
	l.calls = append(l.calls, req)
	first := len(l.calls) == 1
	l.mu.Unlock()
	res, err := l.Summarizer.Summarize(ctx, req)
	if first && err == nil {
		res.State = []byte(`{"v":99,"open":[{"text":"from a newer version"}]}`)
	}
	return res, err
}

func (l *stateLoser) requests() []fold.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// A checkpoint whose offline state this version cannot read (a bug, or a
// newer version's) is built again at the session's next fold from the
// turns it covered, read again from the inbound stream: the summarizer
// folds them from nothing, then the batch on what they made, and
// summarizer_state_rebuild says so. When the stream no longer holds them
// all, the summarizer reads the summary's prose instead and
// summarizer_state_rebuild_failed says why; the session folds either way.
func TestUnreadableSummarizerStateBuiltAgainFromTheStream(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("turn lost %v", lost), func(t *testing.T) {
			var logs testlog.Buffer
			log := zerolog.New(&logs)
			r := rigOn(t, testenv.New(t, testenv.Options{Log: &log}))
			defer func() {
				if t.Failed() {
					t.Log(logs.String())
				}
			}()
			sum := &stateLoser{Summarizer: offline.New()}
			r.sum = sum
			r.start(Config{})
			const session = "lost-state"
			r.Turns(session, 61)
			r.Settled(session, 61, 10) // the first fold (turns 0-9, behind the 50 kept verbatim) left its unreadable state
			if lost {
				// Turn 3 aged out of the inbound stream.
				seq := r.Messages(r.Layout.In, r.Layout.Subjects.In(session, events.KindTurn))[3].Sequence
				in, err := r.JS.Stream(context.Background(), r.Layout.In)
				if err == nil {
					err = in.DeleteMsg(context.Background(), seq)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			r.Turns(session, 10)
			r.Settled(session, 71, 20)
			calls := sum.requests()
			if len(calls) < 2 || string(calls[1].PreviousState) != `{"v":99,"open":[{"text":"from a newer version"}]}` || calls[1].Earlier == nil {
				t.Fatalf("the second fold was not asked with the unreadable state and Earlier: %d calls", len(calls))
			}
			rest := calls[2:]
			if !lost {
				// Turns 0-9 again from nothing, with their texts, then turns 10-19 on what they made.
				if len(rest) != 2 || len(rest[0].Turns) != 10 || rest[0].Turns[0].Index != 0 || rest[0].Turns[3].Text != "message number 003 from Bob" ||
					rest[0].PreviousState != nil || rest[1].Turns[0].Index != 10 || len(rest[1].PreviousState) == 0 || rest[1].Earlier != nil {
					t.Fatalf("after the unreadable state: %d calls, want turns 0-9 from nothing then 10-19 on their state", len(rest))
				}
				if !hasLogEvent(t, &logs, "summarizer_state_rebuild") {
					t.Fatalf("no summarizer_state_rebuild log line")
				}
				return
			}
			if len(rest) != 1 || rest[0].Turns[0].Index != 10 || rest[0].PreviousState != nil || rest[0].PreviousSummary == "" {
				t.Fatalf("after the unreadable state with a turn gone: %d calls, want turns 10-19 on the summary alone", len(rest))
			}
			if !hasLogEvent(t, &logs, "summarizer_state_rebuild_failed") {
				t.Fatalf("no summarizer_state_rebuild_failed log line")
			}
		})
	}
}

func hasLogEvent(t *testing.T, logs *testlog.Buffer, event string) bool {
	t.Helper()
	return slices.ContainsFunc(logs.Lines(t), func(l map[string]any) bool { return l["event"] == event })
}

// A note the first fold took is part of what its state covers: the state
// built again from the stream has it too, so the summary does not lose
// what the note said (the summary's prose, read when the state cannot be
// built, keeps it as well).
func TestUnreadableSummarizerStateBuiltAgainKeepsTheNotes(t *testing.T) {
	var logs testlog.Buffer
	log := zerolog.New(&logs)
	r := rigOn(t, testenv.New(t, testenv.Options{Log: &log}))
	sum := &stateLoser{Summarizer: offline.New()}
	r.sum = sum
	r.start(Config{})
	const session = "lost-state-note"
	r.Turns(session, 2)
	r.Note(session, "n1", "screen", "The booking page shows a refundable deposit of $300.", testenv.T0.Add(15*time.Second))
	r.Turns(session, 59)
	r.Settled(session, 61, 10)
	if s := r.Summaries(session); len(s) != 1 || !strings.Contains(s[0].Summary, "$300") {
		t.Fatalf("the first summary does not hold the note: %+v", s)
	}
	r.Turns(session, 10)
	r.Settled(session, 71, 20)
	if !hasLogEvent(t, &logs, "summarizer_state_rebuild") {
		t.Fatalf("the state was not built again")
	}
	s := r.Summaries(session)
	if last := s[len(s)-1].Summary; !strings.Contains(last, "$300") {
		t.Fatalf("the summary after the state was built again lost the note: %q", last)
	}
}
