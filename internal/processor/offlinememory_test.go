package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/offline"
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
