package service

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// A packed form unpacks into the encoding it was made from, byte for
// byte, whatever the texts: none, many turns of words numbered in one,
// two or three bytes (20,000 distinct words), meta, repeated turn ids.
func TestPackedFormUnpacksExactly(t *testing.T) {
	p, err := newPacker()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name         string
		turns, words int
	}{{"empty", 0, 10}, {"one turn", 1, 10}, {"few words", 300, 50}, {"many words", 3000, 20000}} {
		t.Run(tc.name, func(t *testing.T) {
			rp := newReplay(newAnalyzer(), state.DefaultAdmission(), "s1", 1)
			for i := range tc.turns {
				ws := make([]string, 1+rng.IntN(30))
				for j := range ws {
					ws[j] = fmt.Sprintf("w%d", rng.IntN(tc.words))
				}
				turn := events.Turn{V: 1, Session: "s1", TurnID: fmt.Sprintf("t%d", i-i%7*(i%2)), At: time.Unix(int64(1e9+5*i), 0).UTC(),
					Speaker: []string{"Ana", "Bob"}[i%2], Role: "user", Text: strings.Join(ws, " ")}
				if i%50 == 0 {
					turn.Meta = map[string]string{"k": ws[0]}
				}
				data, _ := json.Marshal(turn)
				rp.apply(uint64(i+1), turn.At, events.KindTurn, data)
			}
			blob, err := encodeReplay(nil, "key", rp)
			if err != nil {
				t.Fatal(err)
			}
			packed := p.pack(blob)
			if tc.turns > 0 && string(packed[:len(planesMagic)]) != planesMagic {
				t.Fatalf("packed as %q, expected its text planes", packed[:len(planesMagic)])
			}
			back, err := p.unpack(packed)
			if err != nil || string(back) != string(blob) {
				t.Fatalf("unpacked %d bytes (%v), want the %d encoded", len(back), err, len(blob))
			}
			// Damaged anywhere: an error, never a panic or another encoding.
			for range 200 {
				bad := append([]byte(nil), packed...)
				bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
				if got, err := p.unpack(bad); err == nil && string(got) != string(blob) {
					t.Fatalf("a damaged packed form unpacked into another encoding")
				}
			}
		})
	}
}

// Planes that do not fit the encoding's length are an error, never a
// panic: a byte more in the continuation plane, a word's first byte
// changed to need one, the length said one short.
func TestJoinTextsRefusesPlanesThatDoNotFit(t *testing.T) {
	rp := newReplay(newAnalyzer(), state.DefaultAdmission(), "s", 1)
	for i, d := range benchTurns(200) {
		rp.apply(uint64(i+1), time.Time{}, events.KindTurn, d)
	}
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		t.Fatal(err)
	}
	p, err := splitTexts(blob)
	if err != nil || len(p.first) < 1000 || len(p.more) == 0 {
		t.Fatalf("split into %d+%d (%v), expected the words of 200 turns", len(p.first), len(p.more), err)
	}
	if back, _, err := joinTexts(p, len(blob)); err != nil || string(back) != string(blob) {
		t.Fatalf("joined %d bytes (%v), want %d", len(back), err, len(blob))
	}
	clone := func(b []byte) []byte { return append([]byte(nil), b...) }
	for _, bad := range []struct {
		name string
		p    textPlanes
		n    int
	}{
		{"length one short", p, len(blob) - 1},
		{"length one more", p, len(blob) + 1},
		{"a continuation byte more", textPlanes{p.rest, p.first, append(clone(p.more), 1)}, len(blob)},
		{"a first byte that needs one more", textPlanes{p.rest, append(clone(p.first[:len(p.first)-1]), 0x81), p.more}, len(blob)},
		{"a first byte less", textPlanes{p.rest, p.first[:len(p.first)-1], p.more}, len(blob)},
	} {
		if _, _, err := joinTexts(bad.p, bad.n); err == nil {
			t.Errorf("%s: joined", bad.name)
		}
	}
}

// A packed form this process made decodes without the load's checks
// (decodeOwn) into the index the checked decode makes: the same offsets
// of words, turns and terms, whether the turns' are found by joining the
// planes or by reading the turns.
func TestOwnDecodeFindsWhatTheCheckedOneDoes(t *testing.T) {
	an := newAnalyzer()
	rp := newReplay(an, state.DefaultAdmission(), "s", 1)
	for i, d := range benchTurns(300) {
		rp.apply(uint64(i+1), time.Time{}, events.KindTurn, d)
	}
	rp.apply(301, time.Time{}, events.KindTurn, mustJSON(t, &events.Turn{V: 1, Session: "s", TurnID: "meta", Speaker: "Ana", Role: "user",
		Text: "a turn with meta, and a word said twice twice", Meta: map[string]string{"k": "v"}}))
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPacker()
	if err != nil {
		t.Fatal(err)
	}
	raw, turnAt, err := p.unpackTurns(p.pack(blob))
	if err != nil || string(raw) != string(blob) || len(turnAt) != rp.idx.ndocs()+1 {
		t.Fatalf("unpacked %d bytes, %d offsets (%v); want %d, %d", len(raw), len(turnAt), err, len(blob), rp.idx.ndocs()+1)
	}
	_, body, err := indexHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range turnAt {
		turnAt[i] -= uint32(len(raw) - len(body))
	}
	want, err := decodeReplay(body, an, state.DefaultAdmission(), "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, offsets := range [][]uint32{turnAt, nil} {
		got, err := decodeOwn(body, cap(raw), offsets, an, state.DefaultAdmission(), "s")
		if err != nil {
			t.Fatal(err)
		}
		g, w := got.idx.base, want.idx.base
		if string(g.b) != string(w.b) || !reflect.DeepEqual(g.turnAt, w.turnAt) || !reflect.DeepEqual(g.wordAt, w.wordAt) ||
			!reflect.DeepEqual(g.termAt, w.termAt) || got.idx.ndocs() != want.idx.ndocs() || got.next != want.next || len(got.mems) != len(want.mems) {
			t.Fatalf("offsets given %v: decoded another index than the checked decode", offsets != nil)
		}
		for d := range want.idx.ndocs() {
			if a, b := mustJSON(t, got.idx.turn(d)), mustJSON(t, want.idx.turn(d)); string(a) != string(b) {
				t.Fatalf("doc %d: %s, want %s", d, a, b)
			}
		}
		for term, pl := range rp.idx.postings {
			if gp, ok := got.idx.list(term); !ok || !slices.Equal(gp, pl) {
				t.Fatalf("term %q: %v, want %v", term, gp, pl)
			}
		}
	}
}

// A request's early unpacking (unpackEarly) is used only for the packed
// form it was made of: another one, even equal byte for byte, is
// unpacked again.
func TestEarlyUnpackOnlyOfItsPackedForm(t *testing.T) {
	p, err := newPacker()
	if err != nil {
		t.Fatal(err)
	}
	rp := newReplay(newAnalyzer(), state.DefaultAdmission(), "s1", 1)
	for i := range 50 {
		data, _ := json.Marshal(events.Turn{V: 1, Session: "s1", TurnID: fmt.Sprintf("t%d", i), At: time.Unix(int64(1e9+i), 0).UTC(),
			Speaker: "Ana", Role: "user", Text: fmt.Sprintf("word%d and word%d", i, i/3)})
		rp.apply(uint64(i+1), time.Unix(int64(1e9+i), 0), events.KindTurn, data)
	}
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{pack: p}
	packed := p.pack(blob)
	early := &earlyUnpack{packed: packed, blob: []byte("made early"), done: make(chan struct{})}
	close(early.done)
	if got, _, err := s.unpackedTurns(packed, early); err != nil || string(got) != "made early" {
		t.Fatalf("its own packed form: %q (%v), expected what was unpacked early", got, err)
	}
	again := slices.Clone(packed)
	if got, _, err := s.unpackedTurns(again, early); err != nil || string(got) != string(blob) {
		t.Fatalf("another packed form: %d bytes (%v), expected it unpacked into the %d encoded", len(got), err, len(blob))
	}
	if got, _, err := s.unpackedTurns(packed, nil); err != nil || string(got) != string(blob) {
		t.Fatalf("none unpacked early: %d bytes (%v), expected the %d encoded", len(got), err, len(blob))
	}
}
