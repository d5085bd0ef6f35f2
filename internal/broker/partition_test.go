package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// With partitions the server stores each inbound subject under the
// partition events.PartitionOf computes, a bot cannot publish a stored
// (pre-partitioned) subject, malformed subjects stay as published, and a
// processor with another partition count refuses the stream.
func TestPartitionedInboundStream(t *testing.T) {
	ns := embedded(t)
	nc, err := Connect(ConnConfig{Name: "t"}, ns, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	subjects, _ := events.NewSubjects("fold")
	l := NewLayout(subjects).Partitioned(8)
	ctx := context.Background()
	if _, err := Provision(ctx, js, l, ProvisionConfig{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if _, err := Provision(ctx, js, l, ProvisionConfig{}, zerolog.Nop()); err != nil {
		t.Fatalf("second provision with the same partitions: %v", err)
	}
	in, err := js.Stream(ctx, l.In)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		session := fmt.Sprintf("sess-%d", i)
		pa, err := js.Publish(ctx, subjects.In(session, events.KindTurn), []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := in.GetMsg(ctx, pa.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		if want := l.Subjects.InStored(session, events.KindTurn); m.Subject != want {
			t.Fatalf("%s stored as %q, want %q", session, m.Subject, want)
		}
		if got, _, err := l.Subjects.ParseIn(m.Subject); err != nil || got != session {
			t.Fatalf("stored subject %q parses as %q, %v", m.Subject, got, err)
		}
	}
	// A pre-partitioned subject is not captured: no stream acknowledges it.
	spoof := l.Subjects.InStored("victim", events.KindTurn)
	if _, err := js.Publish(ctx, spoof, []byte("{}")); err == nil {
		t.Fatalf("a bot could publish the stored subject %q", spoof)
	}
	for _, bad := range []string{"fold.in.x", "fold.in.a.b.c"} {
		pa, err := js.Publish(ctx, bad, []byte("{}"))
		if err != nil {
			t.Fatalf("malformed %q not captured: %v", bad, err)
		}
		m, _ := in.GetMsg(ctx, pa.Sequence)
		if m.Subject != bad {
			t.Fatalf("malformed %q stored as %q", bad, m.Subject)
		}
	}
	for _, other := range []Layout{l.Partitioned(4), l.Partitioned(0)} {
		_, err := Provision(ctx, js, other, ProvisionConfig{}, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), "--partitions") {
			t.Fatalf("provision with %d partitions on an 8-partition stream: %v", other.Subjects.Partitions, err)
		}
	}
	if got := l.PartitionConsumer("foldstream", 3); got != "foldstream-p3of8" {
		t.Fatalf("consumer name %q", got)
	}
}
