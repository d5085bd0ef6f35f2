package state

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// The hand encoder and encoding/json's decoder must agree on every field.
func TestEncodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	disabled := true
	for i := range 200 {
		s := New("sess-" + strings.Repeat("x", i%7))
		for j := range rng.IntN(400) {
			s.AddTurn(rng.Uint64(), TurnRef{Seq: uint64(j*3 + 1), At: rng.Int64N(1 << 42), Tokens: rng.IntN(3) * rng.IntN(500)})
		}
		s.Advance(int64(rng.IntN(int(s.Total)+1)), 0)
		if rng.IntN(2) == 0 {
			s.Summary = "Alice said \"hi\"\n\tBob: \\o/ \x01 ünïcödé … " + strings.Repeat("z", rng.IntN(50))
		}
		s.Version, s.LastSeq, s.Compactions, s.Epoch = rng.Uint64N(1000), rng.Uint64(), rng.IntN(50), uint32(rng.IntN(3))
		if rng.IntN(3) == 0 {
			s.Lease = &Lease{FoldID: "f", Owner: "o", Deadline: time.Unix(1763840000, 123456789).UTC(), From: 1, To: 11, Notes: 2}
			s.LastFoldAt = time.Unix(1763840000, 5).In(time.FixedZone("X", 3600))
			s.RetryAfter = time.Unix(1763840001, 0).UTC()
		}
		if rng.IntN(3) == 0 {
			s.PendingNotes = []NoteRef{{Seq: 4, At: -5}, {Seq: 9, At: 7}}
			s.Config = &events.SessionConfig{RecentWindow: 5, Trigger: "generate", Disabled: &disabled}
			s.Ended = true
			s.Failures, s.OriginalToks, s.SummaryToks = 2, 300, 40
		}
		if rng.IntN(3) == 0 {
			s.Archived, s.Exchanges, s.ExchangesFolded, s.ContextTokens = true, 12, 5, 90000
			s.LastEventAt, s.Evicted, s.EvictedTokens, s.FirstEvictedAt, s.LastEvictedAt = 1763840000123, 40, 5000, -3, 1763840000000
			s.NewMemories([]string{"Alice prefers tea", "Budget is 2k"})
		}
		s.LastActivity = time.Unix(1763840000+int64(i), int64(i)).UTC()
		sameAsJSON(t, fmt.Sprintf("case %d", i), s)
	}
}

// sameAsJSON fails unless the hand encoder's output of s and
// encoding/json's decode to the same checkpoint.
func sameAsJSON(t *testing.T, what string, s *Session) {
	t.Helper()
	data, err := s.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(s.stored())
	// Through Decode, which expands a compressed summarizer state
	// (summary_state.go); encoding/json writes it as it is.
	got, err := Decode(s.ID, data)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, data)
	}
	ref, err := Decode(s.ID, want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(*got), normalize(*ref)) {
		t.Fatalf("%s: the hand encoder and encoding/json disagree\nhand %s\njson %s", what, data, want)
	}
}

// Every field of Session reaches KV through the hand encoder: set one at a
// time, the hand encoder and encoding/json decode to the same checkpoint.
// It fails when Session gains a field that Encode does not write.
func TestEncodeEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range reflect.TypeOf(Session{}).NumField() {
		name := reflect.TypeOf(Session{}).Field(i).Name
		s := &Session{ID: "sess-one"}
		fillField(t, rng, s, i)
		sameAsJSON(t, "field "+name, s)
	}
}

// normalize maps times to UTC instants and nil to empty slices so that
// equal checkpoints compare equal.
func normalize(s Session) Session {
	for _, tp := range []*time.Time{&s.LastFoldAt, &s.RetryAfter, &s.LastActivity} {
		if !tp.IsZero() {
			*tp = tp.UTC()
		}
	}
	if s.Lease != nil {
		l := *s.Lease
		l.Deadline = l.Deadline.UTC()
		s.Lease = &l
	}
	if len(s.Turns) == 0 {
		s.Turns = nil
	}
	return s
}
