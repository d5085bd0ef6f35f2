package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
	"unsafe"

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
	// Texts are kept exactly, whatever their spaces.
	texts := []string{"the tournament form is due friday in Lisbon", "  two  spaces\nand a line ending in one ", "x", "ünïcode naïve, déjà-vu  "}
	for i, at := range times {
		turn := &events.Turn{V: 1, Session: "s1", TurnID: string(rune('a' + i)), At: at, Speaker: []string{"Bob", "Ana", "Bob", "Zoë Ölçü"}[i], Role: "user",
			Text: texts[i], Kind: "speech", Tool: "t", Tokens: i, ContextTokens: 7 * i}
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
	if next, memNext, ok := replayNext(body); !ok || next != rp.next || memNext != 42 {
		t.Fatalf("positions read from the encoding: %d %d %v, want %d 42", next, memNext, ok, rp.next)
	}
	got, err := decodeReplay(append([]byte(nil), body...), an, state.DefaultAdmission(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.idx.ndocs() != rp.idx.ndocs() || got.idx.ndocs() == 0 {
		t.Fatalf("%d docs, want %d", got.idx.ndocs(), rp.idx.ndocs())
	}
	for i := range rp.idx.ndocs() {
		d, g := rp.idx.doc(i), got.idx.doc(i)
		if sp := got.idx.speaker(i); sp != rp.idx.turn(i).Speaker {
			t.Fatalf("doc %d: speaker %q, want %q", i, sp, rp.idx.turn(i).Speaker)
		}
		if g != d || string(mustJSON(t, got.idx.turn(i))) != string(mustJSON(t, rp.idx.turn(i))) ||
			!got.idx.turn(i).At.Equal(rp.idx.turn(i).At) {
			t.Fatalf("doc %d: %+v %+v, want %+v %+v", i, g, got.idx.turn(i), d, rp.idx.turn(i))
		}
	}
	for term, pl := range rp.idx.postings {
		if gp, ok := got.idx.list(term); !ok || !slices.Equal(gp, pl) {
			t.Fatalf("term %q: %v, want %v", term, gp, pl)
		}
	}
	if _, ok := got.idx.list("absent"); ok {
		t.Fatal("a term the index does not hold has postings")
	}
	if !maps.Equal(got.idx.seenIDs(), rp.seen) || got.raws != rp.raws || !slices.Equal(got.dups, rp.dups) ||
		got.next != rp.next || got.from != rp.from || got.read != rp.read || got.memNext != 42 || len(got.mems) != 1 ||
		got.mems[0].text != "Bob brings the form" || len(got.mems[0].terms) == 0 || got.sess.Total != rp.sess.Total {
		t.Fatalf("decoded %+v, want %+v", got, rp)
	}
	// The decoded index grows like the original.
	got.apply(20, times[0], events.KindTurn, mustJSON(t, &events.Turn{V: 1, Session: "s1", TurnID: "z", At: times[0], Speaker: "Al", Role: "user", Text: "tournament"}))
	if hits := got.idx.search([]string{"tournament"}, 0, got.idx.ndocs()); len(hits) != 2 {
		t.Fatalf("after a new turn: %d hits of %d docs (%d before it), postings %v", len(hits), got.idx.ndocs(), rp.idx.ndocs(), got.idx.postings["tournament"])
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

// A loaded index reads its turns and postings where they are encoded, at
// their first use: whatever was read, and whatever was added after the
// load, it encodes as the index built from all of its events encodes,
// and answers the same searches. Bad bytes in a turn or a posting list
// are refused when it is loaded, never met later.
func TestLoadedIndexReadsWhatItIsAsked(t *testing.T) {
	an := newAnalyzer()
	adm := state.DefaultAdmission()
	texts := []string{"the tournament form is due friday", "Lisbon in May", "who brings the form?", "the batteries died twice",
		"form the line", "friday it is then", "tournament in Lisbon", "nobody asked"}
	event := func(i int) []byte {
		return mustJSON(t, &events.Turn{V: 1, Session: "s1", TurnID: fmt.Sprintf("t%d", i%20), At: time.Date(2026, 11, 23, 9, i, 0, 0, time.UTC),
			Speaker: []string{"Al", "Bo"}[i%2], Role: "user", Text: texts[i%len(texts)], Kind: "speech"})
	}
	full := newReplay(an, adm, "s1", 1)
	for i := range 30 { // turn ids repeat after 20: indexed once
		full.apply(uint64(1+2*i), time.Time{}, events.KindTurn, event(i))
	}
	blob, err := encodeReplay(nil, "key", full)
	if err != nil {
		t.Fatal(err)
	}
	_, body, err := indexHeader(blob)
	if err != nil {
		t.Fatal(err)
	}
	load := func() *replay {
		t.Helper()
		rp, err := decodeReplay(append([]byte(nil), body...), an, adm, "s1")
		if err != nil {
			t.Fatal(err)
		}
		return rp
	}
	same := func(what string, got, want *replay) {
		t.Helper()
		g, err1 := encodeReplay(nil, "key", got)
		w, err2 := encodeReplay(nil, "key", want)
		if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
			t.Fatalf("%s: encodes differently (%v %v)", what, err1, err2)
		}
		for _, q := range [][]string{{"tournament"}, {"form", "friday"}, {"lisbon", "batteri"}, {"absent"}} {
			n := want.idx.ndocs()
			if gh, wh := got.idx.expanded(q, 0, n), want.idx.expanded(q, 0, n); !slices.Equal(gh, wh) {
				t.Fatalf("%s: %v finds %v, want %v", what, q, gh, wh)
			}
		}
	}
	same("loaded, nothing read", load(), full)
	partial := load()
	loaded := partial.bytes()
	partial.idx.turn(3)
	partial.idx.list("form")
	if partial.bytes() <= loaded {
		t.Fatalf("a turn and a term read: %d bytes, %d loaded", partial.bytes(), loaded)
	}
	same("loaded, some turns and terms read", partial, full)
	// What a request read is forgotten when it is done, and read again.
	forgotten := load()
	forgotten.idx.turn(3)
	forgotten.idx.list("form")
	forgotten.idx.forget()
	if forgotten.bytes() != loaded || forgotten.idx.turns != nil || len(forgotten.idx.postings) != 0 {
		t.Fatalf("forgotten: %d bytes (%d loaded), %d turns, %d terms held", forgotten.bytes(), loaded, len(forgotten.idx.turns), len(forgotten.idx.postings))
	}
	if forgotten.idx.turn(3).Text != full.idx.turn(3).Text {
		t.Fatalf("turn 3 read again: %q, want %q", forgotten.idx.turn(3).Text, full.idx.turn(3).Text)
	}
	same("loaded, read, forgotten and read again", forgotten, full)
	for _, rp := range []*replay{load(), partial} {
		for i := 30; i < 45; i++ {
			rp.apply(uint64(1+2*i), time.Time{}, events.KindTurn, event(i))
		}
	}
	for i := 30; i < 45; i++ {
		full.apply(uint64(1+2*i), time.Time{}, events.KindTurn, event(i))
	}
	extended := load()
	for i := 30; i < 45; i++ {
		extended.apply(uint64(1+2*i), time.Time{}, events.KindTurn, event(i))
	}
	same("loaded, then extended", extended, full)
	// Forgetting keeps what was added after the load (in turns and in
	// posting lists that began in the encoding).
	extended.idx.turn(2)
	extended.idx.forget()
	same("loaded, extended and forgotten", extended, full)
	if extended.idx.ndocs() != 20 || extended.raws != full.raws || !slices.Equal(extended.dups, full.dups) {
		t.Fatalf("extended: %d docs of %d turns (%d repeated), want 20 distinct of %d", extended.idx.ndocs(), extended.raws, len(extended.dups), full.raws)
	}

	// Any byte changed: refused, or every turn and term of what loads
	// can be read (a changed text is still a text).
	for at := range body {
		for _, flip := range []byte{0x01, 0x80} {
			bad := append([]byte(nil), body...)
			bad[at] ^= flip
			rp, err := decodeReplay(bad, an, adm, "s1")
			if err != nil {
				continue
			}
			for d := range rp.idx.ndocs() {
				rp.idx.turn(d)
			}
			if b := rp.idx.base; b != nil {
				for i := range b.terms() {
					if pl, ok := rp.idx.list(b.term(i)); !ok || len(pl) == 0 || int(pl[len(pl)-1].doc) >= rp.idx.ndocs() {
						t.Fatalf("byte %d ^ %#x: term %d reads %v", at, flip, i, pl)
					}
				}
			}
		}
	}
}

// Offsets are packed in 2 bytes each while every block of them spans
// less than 64 KB, and kept whole otherwise; either way they read back.
func TestPackedOffsetsReadBack(t *testing.T) {
	for _, gap := range []uint32{1, 700, 1 << 12, 1 << 16} {
		at := make([]uint32, 300)
		for i := range at {
			at[i] = uint32(i) * gap
		}
		o := packOffsets(slices.Clone(at))
		if o.len() != len(at) || (o.whole == nil) != (gap*(offsetBlock-1) < 1<<16) {
			t.Fatalf("gap %d: %d offsets, whole %v", gap, o.len(), o.whole != nil)
		}
		for i, a := range at {
			if o.at(i) != a {
				t.Fatalf("gap %d: offset %d is %d, want %d", gap, i, o.at(i), a)
			}
		}
	}
}

// An encoding handed over (decodeReplayOwned) is the index's base where
// it is, counted whole in the index's memory, and decodes to the same
// replay as a copy: both encode again to the same bytes.
func TestOwnedEncodingIsKeptWhereItIs(t *testing.T) {
	an := newAnalyzer()
	rp := newReplay(an, state.DefaultAdmission(), "s", 1)
	for i, d := range benchTurns(200) {
		rp.apply(uint64(i+1), time.Time{}, events.KindTurn, d)
	}
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := indexHeader(blob)
	copied, err := decodeReplay(slices.Clone(body), an, state.DefaultAdmission(), "s")
	if err != nil {
		t.Fatal(err)
	}
	owned := slices.Clone(body)
	held := len(owned) + 100
	got, err := decodeReplayOwned(owned, held, an, state.DefaultAdmission(), "s")
	if err != nil {
		t.Fatal(err)
	}
	base := got.idx.base
	if start := &base.b[0]; uintptr(unsafe.Pointer(start)) < uintptr(unsafe.Pointer(&owned[0])) ||
		uintptr(unsafe.Pointer(start)) >= uintptr(unsafe.Pointer(&owned[0]))+uintptr(len(owned)) {
		t.Fatal("the owned encoding was copied")
	}
	if base.bytes() < int64(held) || base.bytes()-int64(held) != copied.idx.base.bytes()-int64(len(copied.idx.base.b)) {
		t.Fatalf("owned base counts %d bytes, expected the %d held and the offsets", base.bytes(), held)
	}
	for _, r := range []*replay{copied, got} {
		again, err := encodeReplay(nil, "key", r)
		if err != nil || !bytes.Equal(again, blob) {
			t.Fatalf("encoded again: %d bytes (%v), want the %d first written", len(again), err, len(blob))
		}
	}
}
