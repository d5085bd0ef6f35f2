package state

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/klauspost/compress/s2"
)

// fillField sets field i of s to a random value that is not zero. It fails
// on a field type it does not know: a new Session field must be taught to
// Pack, Unpack and this filler.
func fillField(t *testing.T, rng *rand.Rand, s *Session, i int) {
	t.Helper()
	f := reflect.ValueOf(s).Elem().Field(i)
	name := reflect.TypeOf(*s).Field(i).Name
	at := func() time.Time {
		return time.Unix(rng.Int64N(1<<35)-1<<34, rng.Int64N(1e9)).In(time.FixedZone("X", 3600))
	}
	switch v := f.Addr().Interface().(type) {
	case *string:
		*v = "Alice said \"hi\" ünïcödé\n" + strings.Repeat("z", rng.IntN(40))
	case *uint64:
		*v = 1 + rng.Uint64N(1<<63)
	case *uint32:
		*v = 1 + rng.Uint32N(1<<31)
	case *int64:
		*v = rng.Int64N(1<<50) - 1<<49 | 1
	case *int:
		*v = rng.IntN(1<<30) - 1<<29 | 1
	case *bool:
		*v = true
	case *time.Time:
		*v = at()
	case **Lease:
		*v = &Lease{FoldID: "f-" + name, Owner: "o", Deadline: at(), From: rng.Int64N(100), To: -3, Notes: 2}
	case *TurnRefs:
		var seq uint64 = rng.Uint64N(1 << 40)
		for range 1 + rng.IntN(700) {
			seq += 1 + rng.Uint64N(1000)
			*v = append(*v, TurnRef{Seq: seq, At: rng.Int64N(1<<42) - 1<<41, Tokens: rng.IntN(3) * rng.IntN(5000)})
		}
	case *[]NoteRef:
		for range 1 + rng.IntN(5) {
			*v = append(*v, NoteRef{Seq: rng.Uint64(), At: rng.Int64N(1<<42) - 1<<41})
		}
	case *[]byte:
		*v = make([]byte, 1+rng.IntN(3000))
		for i := range *v {
			(*v)[i] = byte(rng.IntN(256))
		}
	case *IDHashes:
		for range 1 + rng.IntN(300) {
			*v = append(*v, rng.Uint64())
		}
	case **events.SessionConfig:
		disabled, hour := rng.IntN(2) == 0, rng.IntN(24)
		*v = &events.SessionConfig{Mode: "tokens", ContextWindow: 32000, IdleThreshold: 0.55, Disabled: &disabled,
			ResetPolicy: events.ResetDaily, ResetHour: &hour}
	case **ToolPairs:
		tp := &ToolPairs{Open: rng.IntN(4), Run: rng.IntN(40)}
		at := rng.Int64N(1 << 40)
		for range 1 + rng.IntN(50) {
			at += 1 + rng.Int64N(30)
			tp.Joined = append(tp.Joined, at)
		}
		*v = tp
	default:
		t.Fatalf("Session.%s has type %s: teach Pack, Unpack and fillField about it", name, f.Type())
	}
	if f.IsZero() {
		t.Fatalf("filler left Session.%s zero", name)
	}
}

func packRoundTrip(t *testing.T, s *Session) *Session {
	t.Helper()
	data, err := s.Pack(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unpack(s.ID, data)
	if err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if a, b := canonical(got), canonical(s); !reflect.DeepEqual(a, b) {
		va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
		for i := range va.NumField() {
			if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
				t.Errorf("pack round trip changed Session.%s", va.Type().Field(i).Name)
			}
		}
		t.FailNow()
	}
	return got
}

// Every field of Session survives Pack and Unpack, alone and all together:
// a field added to Session without being packed fails here.
func TestPackEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := reflect.TypeOf(Session{}).NumField()
	if n >= 64 {
		t.Fatalf("Session has %d fields; the packed form's field mask holds 63", n)
	}
	all := &Session{ID: "sess-all"}
	for i := range n {
		if reflect.TypeOf(Session{}).Field(i).Name == "ID" {
			continue // the caller's key, not packed
		}
		one := &Session{ID: "sess-one"}
		fillField(t, rng, one, i)
		packRoundTrip(t, one)
		fillField(t, rng, all, i)
	}
	packRoundTrip(t, all)
	if got := packRoundTrip(t, &Session{ID: "empty"}); got.CoveredThrough != 0 {
		t.Fatal("zero session changed")
	}
	packRoundTrip(t, New("fresh")) // covered_through -1
}

// A session with a sealed backlog keeps every ref in memory, where the KV
// form keeps only the inline tail.
func TestPackKeepsSealedRefs(t *testing.T) {
	s := New("backlog")
	for i := range 3 * ChunkSize {
		s.AddTurn(uint64(i), TurnRef{Seq: uint64(5 + i), At: int64(1763840000000 + i)})
	}
	s.Sealed = 2 * ChunkSize
	got := packRoundTrip(t, s)
	if len(got.Turns) != 3*ChunkSize {
		t.Fatalf("%d refs unpacked, want %d", len(got.Turns), 3*ChunkSize)
	}
}

// The packed form is smaller than the KV form for a typical session.
func TestPackSmallerThanKVForm(t *testing.T) {
	s := typicalSession()
	packed, err := s.Pack(nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := s.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(packed) >= len(kv) {
		t.Fatalf("packed %d bytes, KV form %d", len(packed), len(kv))
	}
	packRoundTrip(t, s)
}

func TestUnpackRejectsCorrupt(t *testing.T) {
	data, err := typicalSession().Pack(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{nil, {}, {9}, data[:len(data)-1], append(append([]byte(nil), data...), 0), {packVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}} {
		if _, err := Unpack("x", bad); err == nil {
			t.Errorf("unpacked corrupt bytes %x", bad)
		}
	}
}

// The summarizer's state is packed compressed, as a checkpoint stores it,
// and unpacks to the backend's own bytes, not sharing the packed form's.
func TestPackSummaryState(t *testing.T) {
	offline := offlineState(t)
	for _, c := range []struct {
		name  string
		state []byte
		max   int // packed form at most this many bytes
	}{
		{"offline", offline, len(offline) * 6 / 10},
		{"small", []byte(`{"v":1}`), 100},
		{"incompressible", randomBytes(4000), 4100},
		{"begins with the mark", append(bytes.Clone(stateMagic), `{"v":1}`...), 100},
	} {
		s := New("s1")
		s.SummaryState = bytes.Clone(c.state)
		data, err := s.Pack(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > c.max {
			t.Errorf("%s: %d-byte state packed into %d bytes, want at most %d", c.name, len(c.state), len(data), c.max)
		}
		got, err := Unpack(s.ID, data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got.SummaryState, c.state) {
			t.Fatalf("%s: state unpacked as %q", c.name, got.SummaryState)
		}
		clear(data)
		if !bytes.Equal(got.SummaryState, c.state) {
			t.Fatalf("%s: unpacked state shares the packed form's bytes", c.name)
		}
	}
}

// A session whose checkpoints keep its state's stored form packs that
// form's bytes (the same as Pack's), and unpacking leaves the stored form
// its next checkpoint would make, held for the unpacked state.
func TestPackReusingStateText(t *testing.T) {
	s := sessionWithState(t)
	var st StateText
	if _, err := s.EncodeReusing(nil, &st); err != nil {
		t.Fatal(err)
	}
	want, err := s.Pack(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.PackReusing(nil, &st)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("packed with the text held: %d bytes (%v), without: %d bytes", len(got), err, len(want))
	}
	var fresh StateText // nothing held yet: made now
	if got, err = s.PackReusing(nil, &fresh); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("packed with no text held: %d bytes (%v), want %d", len(got), err, len(want))
	}
	var after StateText
	back, err := UnpackReusing(s.ID, got, &after)
	if err != nil || !bytes.Equal(back.SummaryState, s.SummaryState) {
		t.Fatalf("unpacked state %d bytes (%v), want %d", len(back.SummaryState), err, len(s.SummaryState))
	}
	var made StateText
	made.of(back.SummaryState)
	if !reflect.DeepEqual(after, made) {
		t.Fatal("the text left by UnpackReusing is not the one a checkpoint of the unpacked state makes")
	}
	var none StateText
	if _, err := UnpackReusing("x", []byte{packVersion, 0}, &none); err != nil || !reflect.DeepEqual(none, StateText{}) {
		t.Fatalf("a session without a state left a text (%v)", err)
	}
}

// A packed state that does not expand is an error, not a panic nor a
// session without its state.
func TestUnpackRejectsCorruptState(t *testing.T) {
	block := s2.Encode(nil, offlineState(t))
	huge := binary.AppendUvarint(nil, maxStateExpanded+1)
	for name, stored := range map[string][]byte{
		"mark alone":       bytes.Clone(stateMagic),
		"truncated block":  append(bytes.Clone(stateMagic), block[:len(block)/2]...),
		"block too long":   append(append(bytes.Clone(stateMagic), block...), 0, 0, 0),
		"expands too far":  append(append(bytes.Clone(stateMagic), huge...), block[1:]...),
		"bad block header": append(bytes.Clone(stateMagic), 0xff, 0xff, 0xff),
		"empty":            {},
	} {
		data := []byte{packVersion}
		data = binary.AppendUvarint(data, 1<<pSummaryState)
		data = packBytes(data, stored)
		if s, err := Unpack("x", data); err == nil {
			t.Errorf("%s: unpacked, state %q", name, s.SummaryState)
		}
	}
}

// No bytes may crash Unpack, and whatever unpacks packs back to a session
// that unpacks the same.
func FuzzUnpack(f *testing.F) {
	for _, s := range []*Session{typicalSession(), New("s"), {ID: "x", Lease: &Lease{FoldID: "f"}, PendingNotes: []NoteRef{{1, 2}}, MemoryIDs: IDHashes{7}},
		{ID: "st", SummaryState: offlineLikeState(10)}} {
		data, err := s.Pack(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Unpack("x", data)
		if err != nil {
			return
		}
		again, err := s.Pack(nil)
		if err != nil {
			return // a config that does not marshal
		}
		got, err := Unpack("x", again)
		if err != nil {
			t.Fatalf("repacked session does not unpack: %v", err)
		}
		if a, b := canonical(got), canonical(s); !reflect.DeepEqual(a, b) {
			t.Fatalf("repack changed the session:\n%+v\n%+v", b, a)
		}
	})
}
