package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// A session's events stored under two layouts, interleaved with another
// session's, are read once each in stream order, from any sequence; the
// newest and the per-subject counts cover both layouts.
func TestSessionEventsReadEveryLayoutInOrder(t *testing.T) {
	ns := embedded(t)
	nc, err := Connect(ConnConfig{URL: ns.ClientURL(), Name: "t"}, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	subjects, _ := events.NewSubjects("fold")
	l := NewLayout(subjects)
	if _, err := Provision(ctx, js, l, ProvisionConfig{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	s, _ := js.Stream(ctx, l.In)
	sc := s.CachedInfo().Config
	var want []uint64
	publish := func(session, data string) {
		ack, err := js.Publish(ctx, subjects.In(session, events.KindTurn), []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if session == "s1" {
			want = append(want, ack.Sequence)
		}
	}
	for phase, n := range []int{0, 3, 0, 2} { // 0 -> 3 -> 0 -> 2 partitions
		sc.SubjectTransform = l.Partitioned(n).inTransform()
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			publish("s1", fmt.Sprintf("p%d-%d", phase, i))
			publish("s2", "other")
		}
	}
	read := func(from uint64) []uint64 {
		var got []uint64
		r := NewSessionEvents(s, subjects, "s1", from)
		for {
			m, err := r.Next(ctx)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return got
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Sequence)
		}
	}
	if got := read(0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	if got := read(want[4]); fmt.Sprint(got) != fmt.Sprint(want[4:]) {
		t.Errorf("from %d: read %v, want %v", want[4], got, want[4:])
	}
	last, err := LastSessionEvent(ctx, s, subjects, "s1")
	if err != nil || last.Sequence != want[len(want)-1] {
		t.Errorf("last: %v %v, want sequence %d", last, err, want[len(want)-1])
	}
	stored, _, err := SessionStored(ctx, s, subjects, "s1")
	total := uint64(0)
	for _, n := range stored {
		total += n
	}
	if err != nil || total != uint64(len(want)) || len(stored) != 3 {
		t.Errorf("stored %v (%v): want %d events on 3 subjects", stored, err, len(want))
	}
}
