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

// BenchmarkIndexBuild10k is the CPU side of a cold recall index: decoding,
// applying and indexing 10,000 turns (6-30 words from a Zipf-distributed
// vocabulary of 3,000 words), with a fresh replay and stem cache per
// iteration. Reading them from the stream comes on top.
func BenchmarkIndexBuild10k(b *testing.B) {
	data := benchTurns(10_000)
	b.ResetTimer()
	for range b.N {
		rp := newReplay(newAnalyzer(), state.DefaultAdmission(), "s", 1)
		for i, d := range data {
			rp.apply(uint64(i+1), time.Time{}, events.KindTurn, d)
		}
		if rp.idx.ndocs() != len(data) {
			b.Fatalf("%d docs indexed, want %d", rp.idx.ndocs(), len(data))
		}
	}
}

// BenchmarkIndexLoad10k is the CPU side of a recall index loaded from the
// store: decoding the same 10,000 turns' persisted replay (BenchmarkIndexBuild10k's
// workload). Reading its chunks from the bucket comes on top.
func BenchmarkIndexLoad10k(b *testing.B) {
	rp, blob := encodedReplay10k(b)
	_, body, _ := indexHeader(blob)
	b.ResetTimer()
	for range b.N {
		if _, err := decodeReplay(body, rp.idx.an, state.DefaultAdmission(), "s"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexUnpack10k is a request to a session kept packed: the
// same 10,000 turns' packed form (index_pack.go) unpacked and decoded
// again, with the load's checks.
func BenchmarkIndexUnpack10k(b *testing.B) {
	rp, blob := encodedReplay10k(b)
	p, err := newPacker()
	if err != nil {
		b.Fatal(err)
	}
	packed := p.pack(blob)
	b.ReportMetric(float64(len(packed))/float64(len(blob)), "packed/encoded")
	b.ResetTimer()
	for range b.N {
		raw, err := p.unpack(packed)
		if err != nil {
			b.Fatal(err)
		}
		_, body, _ := indexHeader(raw)
		if _, err := decodeReplayOwned(body, cap(raw), rp.idx.an, state.DefaultAdmission(), "s"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTurns are n turns' payloads of 6-30 words from a Zipf-distributed
// vocabulary of 3,000 words.
func benchTurns(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 3000)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(words)-1))
	data := make([][]byte, n)
	for i := range data {
		ws := make([]string, 6+rng.IntN(25))
		for j := range ws {
			ws[j] = words[zipf.Uint64()]
		}
		data[i], _ = json.Marshal(events.Turn{V: 1, Session: "s", TurnID: fmt.Sprintf("t%05d", i), At: time.Unix(int64(i), 0),
			Speaker: "Alice", Role: "user", Text: strings.Join(ws, " ")})
	}
	return data
}

// encodedReplay10k is BenchmarkIndexBuild10k's 10,000 turns applied to a
// replay, and its encoding as the store keeps it.
func encodedReplay10k(b *testing.B) (*replay, []byte) {
	b.Helper()
	rp := newReplay(newAnalyzer(), state.DefaultAdmission(), "s", 1)
	for i, d := range benchTurns(10_000) {
		rp.apply(uint64(i+1), time.Time{}, events.KindTurn, d)
	}
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		b.Fatal(err)
	}
	return rp, blob
}

// BenchmarkIndexUnpackOwn10k is BenchmarkIndexUnpack10k without the
// load's checks: a packed form this process made (decodeOwn).
func BenchmarkIndexUnpackOwn10k(b *testing.B) {
	rp, blob := encodedReplay10k(b)
	p, err := newPacker()
	if err != nil {
		b.Fatal(err)
	}
	packed := p.pack(blob)
	b.ResetTimer()
	for range b.N {
		raw, turnAt, err := p.unpackTurns(packed)
		if err != nil {
			b.Fatal(err)
		}
		_, body, _ := indexHeader(raw)
		for i := range turnAt {
			turnAt[i] -= uint32(len(raw) - len(body))
		}
		if _, err := decodeOwn(body, cap(raw), turnAt, rp.idx.an, state.DefaultAdmission(), "s"); err != nil {
			b.Fatal(err)
		}
	}
}
