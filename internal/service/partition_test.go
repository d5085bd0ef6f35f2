package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/rs/zerolog"
)

// Under --partitions the stream stores a session's events under their
// partitioned subjects: a cold build of the recall index still finds the
// session's last reset there and reads only the events since, not the
// session's whole history.
func TestColdBuildStartsAtTheLastResetWithPartitions(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options{Partitions: 4})
	ctx := context.Background()
	publish := func(subject string, v any) {
		data, _ := json.Marshal(v)
		if _, err := b.JS.Publish(ctx, subject, data); err != nil {
			t.Fatal(err)
		}
	}
	subj := b.Layout.Subjects
	for i := range 3 {
		publish(subj.In("s1", events.KindTurn), testenv.Turn("s1", i))
	}
	publish(subj.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpReset, At: testenv.T0.Add(40 * time.Second)})
	publish(subj.In("s1", events.KindTurn), testenv.Turn("s1", 5))
	d, err := service.NewDirect(t, ctx, b.JS, b.Layout, state.NewStore(b.JS, b.KV), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	from, read, err := d.ReplayStart(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if from != 4 || read != 2 {
		t.Fatalf("the replay started at sequence %d and read %d events, want 4 (the reset) and 2", from, read)
	}
}
