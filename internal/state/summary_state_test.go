package state

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
)

// offlineLikeState is a summarizer state of the offline backend's shape:
// JSON statements with speakers, texts and stemmed terms.
func offlineLikeState(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"v":1,"names":["Alice","Bob"],"open":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sp":"Alice","at":%d,"text":"Alice said the team should warm up at 6:%02d with two quick games before the bracket.","w":7.5,"terms":"team warm quick game bracket"}`, 1795936266+60*i, i%60)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// A large state is stored compressed, a small one as it is, and both read
// back as the backend's own bytes.
func TestSummaryStateStoredCompressed(t *testing.T) {
	for _, c := range []struct {
		name       string
		state      []byte
		compressed bool
	}{
		{"offline-like, 13 KiB", offlineLikeState(90), true},
		{"small", []byte(`{"v":1}`), false},
		{"incompressible", randomBytes(4000), false},
	} {
		s := New("s1")
		s.Summary, s.SummaryState = "Alice and Bob planned the match.", c.state
		data, err := s.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		doc, tail := splitTail(data)
		if !json.Valid(doc) {
			t.Fatalf("%s: the checkpoint's JSON is not valid: %q", c.name, doc)
		}
		stored := storedStateOf(t, data)
		if got := bytes.HasPrefix(stored, stateMagic); got != c.compressed {
			t.Errorf("%s: stored compressed %v, want %v", c.name, got, c.compressed)
		}
		// A compressed state follows the JSON as it is (not in base64).
		if c.compressed != bytes.Equal(tail, stored) {
			t.Errorf("%s: after the JSON %d bytes, want the compressed state (%v)", c.name, len(tail), c.compressed)
		}
		if c.compressed && len(data) >= len(doc)+len(c.state)*2/3 {
			t.Errorf("%s: %d bytes stored for a %d-byte state", c.name, len(data)-len(doc), len(c.state))
		}
		got, err := Decode("s1", data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got.SummaryState, c.state) {
			t.Errorf("%s: state changed on a round trip", c.name)
		}
	}
}

// A checkpoint written with its state inside the JSON (in base64, as
// encoding/json writes bytes) still loads with its state: the state's
// bytes as written before states were compressed, or compressed as written
// while compressed states were kept in the JSON.
func TestSummaryStateInTheJSONLoads(t *testing.T) {
	st := offlineLikeState(40)
	for name, stored := range map[string][]byte{
		"uncompressed": st,
		"compressed":   append(bytes.Clone(stateMagic), s2.Encode(nil, st)...),
	} {
		old := `{"id":"s1","summary":"Alice talked.","cursor":0,"total":0,"covered_through":-1,"last_seq":0,"summary_state":"` +
			base64.StdEncoding.EncodeToString(stored) + `"}`
		got, err := Decode("s1", []byte(old))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got.SummaryState, st) || got.Summary != "Alice talked." {
			t.Fatalf("%s: older checkpoint read as %q / %q", name, got.Summary, got.SummaryState)
		}
	}
}

// What follows a checkpoint's JSON must be a compressed state, and a
// checkpoint holds at most one state.
func TestSummaryStateAfterTheJSONChecked(t *testing.T) {
	s := New("s1")
	s.SummaryState = offlineLikeState(30)
	data, err := s.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, tail := splitTail(data)
	both := append(append(bytes.Clone(doc[:len(doc)-1]), `,"summary_state":"e30="}`...), tail...)
	for name, v := range map[string][]byte{
		"not compressed": append(bytes.Clone(doc), 0, '{', '}'),
		"mark cut":       append(bytes.Clone(doc), stateMagic[:2]...),
		"two states":     both,
		"NUL in JSON":    append(bytes.Clone(doc[:5]), append([]byte{0}, doc[5:]...)...),
	} {
		if _, err := Decode("s1", v); err == nil {
			t.Errorf("%s: decoded without an error: %q", name, v)
		}
	}
}

// storedStateOf returns the state as the checkpoint data stores it: after
// its JSON, or in it.
func storedStateOf(t *testing.T, data []byte) []byte {
	t.Helper()
	doc, tail := splitTail(data)
	if tail != nil {
		return tail
	}
	var asStored struct {
		State []byte `json:"summary_state"`
	}
	if err := json.Unmarshal(doc, &asStored); err != nil {
		t.Fatal(err)
	}
	return asStored.State
}

// A state that itself begins with the mark of a compressed one is stored
// so that it reads back as itself, however short.
func TestSummaryStateThatLooksCompressed(t *testing.T) {
	for _, st := range [][]byte{append(bytes.Clone(stateMagic), 'x'), append(bytes.Clone(stateMagic), s2.Encode(nil, offlineLikeState(10))...)} {
		s := New("s1")
		s.SummaryState = st
		data, err := s.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode("s1", data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.SummaryState, st) {
			t.Fatalf("state %q read back as %q", st, got.SummaryState)
		}
	}
}

// A damaged compressed state fails the checkpoint's decode (it is corrupt,
// as a damaged base64 is), a block claiming a huge size is refused
// before anything that large is allocated, and so is a block of no bytes
// (it would read back as no state, not as itself).
func TestSummaryStateDamaged(t *testing.T) {
	s := New("s1")
	s.SummaryState = offlineLikeState(30)
	data, _ := s.Encode(nil)
	stored := storedStateOf(t, data)
	damaged := bytes.Clone(stored)
	damaged[len(damaged)-3] ^= 0xff
	huge := append(bytes.Clone(stateMagic), 0xff, 0xff, 0xff, 0xff, 0x0f) // uvarint length ~4 GiB
	empty := append(bytes.Clone(stateMagic), 0x00)                        // a block of 0 bytes: Encode never writes it
	const doc = `{"id":"s1","cursor":0,"total":0,"covered_through":-1,"last_seq":0}`
	for name, st := range map[string][]byte{"flipped": damaged, "truncated": stored[:len(stored)/2], "huge": huge, "empty": empty} {
		// After the JSON, as Encode writes it, and in it, as it was
		// written before.
		after := append([]byte(doc), st...)
		in := []byte(doc[:len(doc)-1] + `,"summary_state":"` + base64.StdEncoding.EncodeToString(st) + `"}`)
		for _, v := range [][]byte{after, in} {
			if got, err := Decode("s1", v); err == nil && bytes.Equal(got.SummaryState, s.SummaryState) {
				t.Errorf("%s: a damaged state decoded as the original", name)
			} else if err == nil && name != "flipped" {
				t.Errorf("%s: decoded without an error", name)
			}
		}
	}
}

// A checkpoint encoded reusing the state's stored form is byte for byte
// the one Encode writes, through a session's states: a new state after a
// fold, the same state again, one changed in place (same bytes, same
// length), a small one stored as it is, and none.
func TestEncodeReusingTheStateText(t *testing.T) {
	s := New("s1")
	s.Summary = "Alice and Bob planned the match."
	var st StateText
	check := func(step string) {
		t.Helper()
		want, err := s.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.EncodeReusing(nil, &st)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: reusing the state's stored form wrote\n%s\nwant\n%s", step, got, want)
		}
		back, err := Decode("s1", got)
		if err != nil || !bytes.Equal(back.SummaryState, s.SummaryState) {
			t.Fatalf("%s: state read back as %q (%v)", step, back.SummaryState, err)
		}
	}
	s.SummaryState = offlineLikeState(40)
	check("first state")
	s.Version++
	check("same state, next checkpoint")
	s.SummaryState = offlineLikeState(60)
	check("next fold's state")
	s.SummaryState[len(s.SummaryState)/2] ^= 1
	check("state changed in place")
	s.SummaryState = []byte(`{"v":1}`)
	check("small state")
	s.SummaryState = nil
	check("no state")
	s.SummaryState = offlineLikeState(40)
	check("a state again")
	s.SummaryState = offlineLikeState(70)
	st = *StoredText(s.SummaryState) // made where the fold ran
	check("a state whose stored form was made before")
	s.SummaryState = []byte(`{"v":1}`)
	st = *StoredText(s.SummaryState)
	check("a small state whose stored form was made before")
}

func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 8))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	b[0] = '{'
	return b
}

// BenchmarkCheckpointEncodeWithState: a checkpoint carrying the offline
// summarizer's state, compressed as it is stored.
func BenchmarkCheckpointEncodeWithState(b *testing.B) {
	s := New("sess-00001")
	s.Summary, s.SummaryState = strings.Repeat("Alice and Bob planned the match. ", 35), offlineLikeState(90)
	buf := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Encode(buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
	}
}

// BenchmarkCheckpointEncodeReusingState: the same checkpoint written again
// with its state unchanged, as the processor writes it (EncodeReusing).
func BenchmarkCheckpointEncodeReusingState(b *testing.B) {
	s := New("sess-00001")
	s.Summary, s.SummaryState = strings.Repeat("Alice and Bob planned the match. ", 35), offlineLikeState(90)
	buf := make([]byte, 0, 32<<10)
	var st StateText
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.EncodeReusing(buf[:0], &st)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
	}
}
