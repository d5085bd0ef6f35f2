package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
)

// BenchmarkLoad10kTurns replays one session of 10,000 turns and 1,000
// summary versions (the recovery figure of docs/benchmarks.md):
//
//	go test -run xxx -bench Load10k -benchtime 5x ./internal/replay/
func BenchmarkLoad10kTurns(b *testing.B) {
	const turns, every = 10000, 10
	env := brokertest.Start(b, brokertest.Options{Name: "replay-bench"})
	js, l := env.JS, env.Layout
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for i := range turns {
		data, _ := json.Marshal(events.Turn{V: 1, Session: "s", TurnID: fmt.Sprintf("s-%d", i), At: at.Add(time.Duration(i) * time.Second),
			Speaker: "Alice", Role: "user", Text: "Let's try the new team comp on Tokyo tonight; Bob keeps dying as Hulk."})
		if _, err := js.PublishAsync(l.Subjects.In("s", events.KindTurn), data); err != nil {
			b.Fatal(err)
		}
		if (i+1)%every == 0 {
			v := uint64((i + 1) / every)
			data, _ := json.Marshal(events.SummaryUpdated{V: 1, Session: "s", Version: v, Summary: "Alice and Bob planned the Tokyo match.",
				Cursor: int64(i + 1), CoveredThroughTurn: int64(i), At: at.Add(time.Duration(i) * time.Second)})
			if _, err := js.PublishAsync(l.Subjects.Out("s", events.KindSummary), data); err != nil {
				b.Fatal(err)
			}
		}
	}
	<-js.PublishAsyncComplete()
	var entries int
	for b.Loop() {
		tl, err := Load(ctx, js, l, "s")
		if err != nil {
			b.Fatal(err)
		}
		entries = len(tl.Entries)
	}
	b.ReportMetric(float64(entries), "entries")
}
