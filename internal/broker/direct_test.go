package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// ReadSeqs reads the messages asked for, of any subject and in any order,
// more than it sends ahead at once, and leaves out a sequence past the
// stream's end.
func TestReadSeqsReadsTheMessagesAskedFor(t *testing.T) {
	js, subjects, l := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seqs []uint64
	want := map[uint64]string{}
	for i := range 3 * readAhead {
		data := fmt.Sprintf("s%d-%d", i%2, i)
		ack, err := js.Publish(ctx, subjects.In(fmt.Sprintf("s%d", i%2), events.KindTurn), []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 != 1 {
			seqs = append([]uint64{ack.Sequence}, seqs...)
			want[ack.Sequence] = data
		}
	}
	seqs = append(seqs[:readAhead/2], append([]uint64{10 * readAhead}, seqs[readAhead/2:]...)...)
	found := map[uint64][]byte{}
	if err := ReadSeqs(ctx, js, l.In, seqs, found); err != nil {
		t.Fatal(err)
	}
	if len(found) != len(want) {
		t.Errorf("found %d messages, want %d", len(found), len(want))
	}
	for seq, data := range want {
		if string(found[seq]) != data {
			t.Errorf("at %d: %q, want %q", seq, found[seq], data)
		}
	}
}

// A stored message with headers of its own named as the server's is read
// at the sequence asked for: one republished from another stream carries
// Nats-Sequence (its origin's), and a publisher may set Status.
func TestReadSeqsReadsMessagesWithTheServersHeaderNames(t *testing.T) {
	js, subjects, l := provisioned(t)
	ctx := context.Background()
	var seqs []uint64
	want := map[uint64]string{}
	for i := range 4 {
		m := nats.NewMsg(subjects.In("s", events.KindTurn))
		m.Data = []byte(fmt.Sprint("turn ", i))
		switch i {
		case 2:
			m.Header.Set(jetstream.SequenceHeader, "1") // as RePublish writes it
		case 3:
			m.Header.Set("Status", "done")
		}
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
		want[ack.Sequence] = string(m.Data)
	}
	found := map[uint64][]byte{}
	if err := ReadSeqs(ctx, js, l.In, seqs, found); err != nil {
		t.Fatal(err)
	}
	for seq, data := range want {
		if string(found[seq]) != data {
			t.Errorf("at %d: %q, want %q", seq, found[seq], data)
		}
	}
}

// provisioned is foldstream's streams on an embedded server, with a
// connection that closes when the test ends.
func provisioned(t *testing.T) (jetstream.JetStream, events.Subjects, Layout) {
	t.Helper()
	ns := embedded(t)
	nc, err := Connect(ConnConfig{URL: ns.ClientURL(), Name: "t"}, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	subjects, _ := events.NewSubjects("fold")
	l := NewLayout(subjects)
	if _, err := Provision(context.Background(), js, l, ProvisionConfig{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return js, subjects, l
}
