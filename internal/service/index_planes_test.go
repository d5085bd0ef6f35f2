package service

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
