package service

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// A replay survives its encoding: the same docs, turns (times in any
// zone or year, meta), postings, sequences, dedup set and memories; and
// every truncation of the encoding is refused, never a panic.
func TestReplayEncodingRoundTrips(t *testing.T) {
	an := newAnalyzer()
	rp := newReplay(an, state.DefaultAdmission(), "s1", 3)
	times := []time.Time{
		time.Date(2026, 11, 23, 9, 0, 0, 123, time.UTC),
		time.Date(2026, 11, 23, 9, 0, 0, 0, time.FixedZone("", 2*3600)),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	}
	for i, at := range times {
		turn := &events.Turn{V: 1, Session: "s1", TurnID: string(rune('a' + i)), At: at, Speaker: "Bob", Role: "user",
			Text: "the tournament form is due friday in Lisbon", Kind: "speech", Tool: "t", Tokens: i, ContextTokens: 7 * i}
		if i == 1 {
			turn.Meta = map[string]string{"k": "v", "a": "b"}
		}
		rp.apply(uint64(10+i), at, events.KindTurn, mustJSON(t, turn))
	}
	rp.mems = []memory{{id: "1.1", speaker: "Bob", text: "Bob brings the form", at: times[0], published: times[1]}}
	rp.memNext = 42
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		t.Fatal(err)
	}
	key, body, err := indexHeader(blob)
	if err != nil || key != "key" {
		t.Fatalf("header: %q %v", key, err)
	}
	got, err := decodeReplay(append([]byte(nil), body...), an, state.DefaultAdmission(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.idx.docs) != len(rp.idx.docs) || len(got.idx.docs) == 0 {
		t.Fatalf("%d docs, want %d", len(got.idx.docs), len(rp.idx.docs))
	}
	for i, d := range rp.idx.docs {
		g := got.idx.docs[i]
		if g.raw != d.raw || g.seq != d.seq || g.len != d.len || string(mustJSON(t, g.turn)) != string(mustJSON(t, d.turn)) ||
			!g.turn.At.Equal(d.turn.At) {
			t.Fatalf("doc %d: %+v %+v, want %+v %+v", i, g, g.turn, d, d.turn)
		}
	}
	for term, pl := range rp.idx.postings {
		if gp := got.idx.postings[term]; len(gp) != len(pl) || gp[0] != pl[0] {
			t.Fatalf("term %q: %v, want %v", term, gp, pl)
		}
	}
	if len(got.idx.postings) != len(rp.idx.postings) || len(got.seen) != len(rp.seen) || len(got.seqs) != len(rp.seqs) ||
		got.next != rp.next || got.from != rp.from || got.read != rp.read || got.memNext != 42 || len(got.mems) != 1 ||
		got.mems[0].text != "Bob brings the form" || len(got.mems[0].terms) == 0 || got.sess.Total != rp.sess.Total {
		t.Fatalf("decoded %+v, want %+v", got, rp)
	}
	// The decoded index grows like the original.
	got.apply(20, times[0], events.KindTurn, mustJSON(t, &events.Turn{V: 1, Session: "s1", TurnID: "z", At: times[0], Speaker: "Al", Role: "user", Text: "tournament"}))
	if hits := got.idx.search([]string{"tournament"}, 0, len(got.idx.docs)); len(hits) != len(rp.idx.docs)+1 {
		t.Fatalf("after a new turn: %d hits of %d docs (%d before it), postings %v", len(hits), len(got.idx.docs), len(rp.idx.docs), got.idx.postings["tournament"])
	}
	for n := range len(body) {
		if _, err := decodeReplay(append([]byte(nil), body[:n]...), an, state.DefaultAdmission(), "s1"); err == nil {
			t.Fatalf("truncated to %d of %d bytes: decoded", n, len(body))
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
