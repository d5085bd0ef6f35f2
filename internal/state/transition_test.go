package state

import (
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

func sessionWithTurns(n int) *Session {
	s := New("s1")
	for i := range n {
		s.AddTurn(HashID(string(rune('a'+i))), TurnRef{Seq: uint64(i + 1), At: int64(1000 * (i + 1)), Tokens: 10})
	}
	return s
}

func TestLandMovesPastTheFold(t *testing.T) {
	s := sessionWithTurns(6)
	s.PendingNotes = []NoteRef{{Seq: 50}, {Seq: 51}}
	s.Lease = &Lease{FoldID: "f"}
	s.Failures, s.RetryAfter, s.ContextTokens, s.Exchanges = 2, time.Unix(99, 0), 4000, 3
	at := time.Unix(1763840000, 0)
	s.Land(Landing{Summary: "sum", Version: 1, Seq: 7, To: 4, Notes: 1, At: at, SummaryTokens: 5, OriginalTokens: 40, Exchanges: 3, State: []byte(`{"v":1}`)})
	if s.Summary != "sum" || string(s.SummaryState) != `{"v":1}` || s.SummaryIsNote || s.Version != 1 || s.SummarySeq != 7 || s.Cursor != 4 || s.CoveredThrough != 3 ||
		len(s.Turns) != 2 || len(s.PendingNotes) != 1 || !s.LastFoldAt.Equal(at) || s.Compactions != 1 || s.Lease != nil ||
		s.Failures != 0 || !s.RetryAfter.IsZero() || s.OriginalToks != 40 || s.SummaryToks != 5 || s.ExchangesFolded != 3 ||
		s.ContextTokens != 0 || s.Evicted != 0 {
		t.Fatalf("after land: %+v", s)
	}
}

func TestLandNoteCountsTheEvictedTurns(t *testing.T) {
	s := sessionWithTurns(6)
	s.SummaryState = []byte(`{"v":1}`)
	s.Land(Landing{Summary: "note", Version: 1, Seq: 7, To: 2, Note: true})
	s.Land(Landing{Summary: "note2", Version: 2, Seq: 9, To: 5, Note: true})
	if !s.SummaryIsNote || s.SummaryState != nil || s.Evicted != 5 || s.EvictedTokens != 50 || s.FirstEvictedAt != 1000 || s.LastEvictedAt != 5000 || s.Cursor != 5 || s.Compactions != 2 {
		t.Fatalf("after two evictions: %+v", s)
	}
}

func TestAdoptableBehindAndAdopt(t *testing.T) {
	s := sessionWithTurns(6)
	s.Version = 2
	ev := &events.SummaryUpdated{Version: 3, Cursor: 4, FoldedNotes: 0, Compactions: 3, Summary: "theirs", SummaryTokens: 9, Mode: "evict"}
	if !s.Adoptable(ev) || s.Behind(ev) {
		t.Fatal("a later summary within the session's turns must be adoptable, not awaited")
	}
	if s.Adoptable(&events.SummaryUpdated{Version: 2, Cursor: 4}) || s.Adoptable(&events.SummaryUpdated{Version: 3, Cursor: 4, Epoch: 1}) || s.Adoptable(nil) {
		t.Fatal("an older version, another epoch or none is not adoptable")
	}
	ahead := &events.SummaryUpdated{Version: 3, Cursor: 9}
	if s.Adoptable(ahead) || !s.Behind(ahead) {
		t.Fatal("a summary past the turns held is awaited")
	}
	s.Ended = true
	if s.Behind(ahead) {
		t.Fatal("an ended session awaits no turns")
	}
	s.Ended = false
	s.Lease = &Lease{FoldID: "f"}
	s.SummaryState = []byte(`{"v":1}`) // of the summary it replaces
	s.Adopt(ev, 12)
	if s.Summary != "theirs" || s.SummaryState != nil || !s.SummaryIsNote || s.Version != 3 || s.SummarySeq != 12 || s.Cursor != 4 || s.Compactions != 3 ||
		s.Lease != nil || s.Evicted != 4 || s.SummaryToks != 9 {
		t.Fatalf("after adopt: %+v", s)
	}
}

func TestFailBacksOff(t *testing.T) {
	now := time.Unix(1763840000, 0)
	base, most := time.Second, 10*time.Second
	s := New("s1")
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		s.Lease = &Lease{FoldID: "f"}
		s.Fail(now, FailModel, base, most)
		if s.Lease != nil || s.Failures != i+1 || !s.RetryAfter.Equal(now.Add(want*time.Second)) {
			t.Fatalf("model failure %d: failures %d, retry after %v", i+1, s.Failures, s.RetryAfter.Sub(now))
		}
	}
	s = New("s1")
	s.Fail(now, FailPersistent, base, most)
	if s.Failures != 1 || !s.RetryAfter.Equal(now.Add(most)) {
		t.Fatalf("persistent failure: %d, %v", s.Failures, s.RetryAfter.Sub(now))
	}
	s = New("s1")
	s.Fail(now, FailTransient, base, most)
	s.Fail(now, FailTransient, base, most)
	if s.Failures != 0 || !s.RetryAfter.Equal(now.Add(base)) {
		t.Fatalf("transient failure: %d, %v", s.Failures, s.RetryAfter.Sub(now))
	}
	s = New("s1")
	s.Lease = &Lease{FoldID: "f"}
	s.Fail(now, FailCanceled, base, most)
	if s.Lease != nil || s.Failures != 0 || !s.RetryAfter.IsZero() {
		t.Fatalf("canceled: %+v", s)
	}
}
