package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// ReadSeqs reads the messages asked for, of any subject and in any order,
// and leaves out a sequence past the stream's end.
func TestReadSeqsReadsTheMessagesAskedFor(t *testing.T) {
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
	var seqs []uint64
	want := map[uint64]string{}
	for i := range 12 {
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
	seqs = append(seqs, 100)
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
