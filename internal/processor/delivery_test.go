package processor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// parseDelivery reads what jetstream.Msg.Metadata reads from real
// deliveries of a real server, pending counts included.
func TestParseDeliveryAgreesWithMetadata(t *testing.T) {
	r := newRig(t)
	r.Turns("s1", 3)
	r.Turns("s2", 2)
	ctx := context.Background()
	cons, err := r.JS.CreateOrUpdateConsumer(ctx, r.Layout.In, jetstream.ConsumerConfig{Durable: "parse", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for msg := range b.Messages() {
		n++
		md, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseDelivery(msg.Reply())
		if err != nil {
			t.Fatalf("%q: %v", msg.Reply(), err)
		}
		want := delivery{stream: md.Sequence.Stream, consumer: md.Sequence.Consumer, pending: md.NumPending, stored: md.Timestamp}
		if got != want {
			t.Errorf("%q: got %+v, Metadata says %+v", msg.Reply(), got, want)
		}
	}
	if n != 5 {
		t.Fatalf("fetched %d deliveries, want 5", n)
	}
}

// Both forms of the ack subject the server sends are read, and anything
// else is refused (the consume loop terminates such a message).
func TestParseDeliveryForms(t *testing.T) {
	ts := time.Date(2026, 11, 25, 23, 0, 0, 123, time.UTC)
	tm := "1795647600000000123"
	if time.Unix(0, 1795647600000000123).UTC() != ts {
		t.Fatalf("test timestamp %s does not say %s", tm, ts)
	}
	want := delivery{stream: 42, consumer: 7, pending: 9, stored: time.Unix(0, 1795647600000000123)}
	for _, subj := range []string{
		"$JS.ACK.FOLD_IN.foldstream.1.42.7." + tm + ".9",                          // v1
		"$JS.ACK._.ACCHASH.FOLD_IN.foldstream.1.42.7." + tm + ".9.rnd",            // v2
		"$JS.ACK.hub.ACCHASH.FOLD_IN.foldstream.2.42.7." + tm + ".9",              // v2 without the last token
		"$JS.ACK.hub.ACCHASH.FOLD_IN.foldstream.2.42.7." + tm + ".9.rnd.and.more", // later tokens ignored
	} {
		got, err := parseDelivery(subj)
		if err != nil {
			t.Errorf("%q: %v", subj, err)
			continue
		}
		if got != want {
			t.Errorf("%q: got %+v, want %+v", subj, got, want)
		}
	}
	for _, subj := range []string{
		"",
		"_INBOX.abc",
		"$JS.ACK.FOLD_IN.foldstream.1.42.7." + tm,           // 8 tokens
		"$JS.ACK._.ACCHASH.FOLD_IN.foldstream.1.42.7." + tm, // 10 tokens
		"$JS.NAK.FOLD_IN.foldstream.1.42.7." + tm + ".9",
	} {
		if _, err := parseDelivery(subj); err == nil {
			t.Errorf("%q: read as a delivery, want an error", subj)
		}
	}
	// A token that is not a number reads as 0, as in nats.go.
	got, err := parseDelivery("$JS.ACK.FOLD_IN.foldstream.1.4x2.7." + tm + ".9")
	if err != nil || got.stream != 0 || got.consumer != 7 {
		t.Errorf("non-numeric stream sequence: got %+v, %v; want stream 0, consumer 7", got, err)
	}
}
