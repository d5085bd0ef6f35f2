package replay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/replay"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/rs/zerolog"
)

// A turn that decodes but that the processor dead-letters (here: dated a
// year ahead of the stream's clock) is shown as rejected and not counted:
// the turns after it keep the processor's numbering.
func TestEventsTheProcessorRejectedAreNotNumbered(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options{Name: "replay-rejected"})
	p, err := processor.New(processor.Config{FlushInterval: 5 * time.Millisecond}, processor.Deps{
		JS: b.JS, Layout: b.Layout, Store: state.NewStore(b.JS, b.KV), Summarizer: offline.New(), Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.RunEngine(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.Now().Add(-time.Minute)
	for i, turn := range []events.Turn{
		{TurnID: "t0", At: at, Text: "hello"},
		{TurnID: "future", At: at.AddDate(1, 0, 0), Text: "from next year"},
		{TurnID: "t1", At: at.Add(time.Second), Text: "still here"},
	} {
		turn.V, turn.Session, turn.Speaker, turn.Role = 1, "s1", "Alice", "user"
		data, _ := json.Marshal(turn)
		if _, err := b.JS.Publish(ctx, b.Layout.Subjects.In("s1", events.KindTurn), data); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	var tl *replay.Timeline
	brokertest.Eventually(t, "the processor dead-lettered the future-dated turn", func() bool {
		tl, err = replay.Load(ctx, b.JS, b.Layout, "s1")
		return err == nil && tl.Totals.DeadLetters == 1
	})
	index := map[string]int64{}
	for _, e := range tl.Entries {
		if e.Turn != nil {
			index[e.Turn.TurnID] = e.Turn.Index
			if e.Turn.TurnID == "future" && e.Invalid == "" {
				t.Errorf("the rejected turn is not marked: %+v", e)
			}
		}
	}
	if index["t0"] != 0 || index["future"] != -1 || index["t1"] != 1 || tl.Totals.Turns != 2 || tl.Totals.InvalidInbound != 1 {
		t.Fatalf("indices %v, totals %+v", index, tl.Totals)
	}
}
