package state

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// A typical hot session: about recent+batch unfolded turns, a full dedup
// ring, a summary.
func typicalSession() *Session {
	s := New("sess-00042")
	for i := range 300 {
		s.AddTurn(uint64(i)*0x9E3779B97F4A7C15, TurnRef{Seq: uint64(1000 + 7*i), At: int64(1763840000000 + 4000*i)})
	}
	s.Advance(240, 0)
	s.Summary = strings.Repeat("Alice and Bob planned the Tokyo match. ", 28)
	s.Version, s.LastSeq, s.LastActivity = 24, 3100, time.Now()
	return s
}

func BenchmarkCheckpointEncodeJSON(b *testing.B) {
	s := typicalSession()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(s.stored()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckpointEncode(b *testing.B) {
	s := typicalSession()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Encode(nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckpointDecode(b *testing.B) {
	data, err := typicalSession().Encode(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("sess-00042", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPack(b *testing.B) {
	s := typicalSession()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = s.Pack(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnpack(b *testing.B) {
	data, err := typicalSession().Pack(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Unpack("sess-00042", data); err != nil {
			b.Fatal(err)
		}
	}
}

// sessionWithState is typicalSession carrying offlineState.
func sessionWithState(tb testing.TB) *Session {
	tb.Helper()
	s := typicalSession()
	s.SummaryState = offlineState(tb)
	return s
}

// offlineState is a state the offline summarizer left after a fold of a
// synthetic voice session (12,963 bytes; 6,078 s2-compressed).
func offlineState(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/offline_state.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkPackWithState: Pack of a session carrying the offline
// summarizer's state; packed-B is the packed form's size.
func BenchmarkPackWithState(b *testing.B) {
	s := sessionWithState(b)
	buf := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = s.Pack(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "packed-B")
}

func BenchmarkUnpackWithState(b *testing.B) {
	s := sessionWithState(b)
	data, err := s.Pack(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Unpack("sess-00042", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointDecodeWithState: Decode of a checkpoint carrying the
// offline summarizer's state (stored compressed).
func BenchmarkCheckpointDecodeWithState(b *testing.B) {
	s := sessionWithState(b)
	data, err := s.Encode(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("sess-00042", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackReusingState: Pack of that session as the processor packs
// it, its state's stored form held from its last checkpoint.
func BenchmarkPackReusingState(b *testing.B) {
	s := sessionWithState(b)
	var st StateText
	if _, err := s.EncodeReusing(nil, &st); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = s.PackReusing(buf[:0], &st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnpackReusingState: Unpack that also keeps the state's stored form
// for the next checkpoint (which then does not compress the state).
func BenchmarkUnpackReusingState(b *testing.B) {
	s := sessionWithState(b)
	data, err := s.Pack(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var st StateText
		if _, err := UnpackReusing("sess-00042", data, &st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointBuffer: a checkpoint of that session as the
// processor writes it, the state's stored form held from the last one,
// into a new buffer and into one kept from an earlier write.
func BenchmarkCheckpointBuffer(b *testing.B) {
	s := sessionWithState(b)
	var st StateText
	if _, err := s.EncodeReusing(nil, &st); err != nil {
		b.Fatal(err)
	}
	for _, reuse := range []bool{false, true} {
		name := "new-buffer"
		if reuse {
			name = "kept-buffer"
		}
		b.Run(name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				data, err := s.EncodeReusing(buf[:0], &st)
				if err != nil {
					b.Fatal(err)
				}
				if reuse {
					buf = data
				}
			}
		})
	}
}
