package state

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

func TestCheckpointRoundTrip(t *testing.T) {
	s := New("s1")
	for i := range 300 {
		s.AddTurn(HashID(string(rune('a'+i%26))+string(rune(i))), TurnRef{Seq: uint64(1000 + 3*i), At: int64(1763840000000 + 7000*i - 5*(i%3)), Tokens: i % 40})
	}
	s.PendingNotes = []NoteRef{{Seq: 5, At: 9}}
	s.Lease = &Lease{FoldID: "f", Owner: "o", Deadline: time.Unix(1763840000, 0).UTC(), From: 0, To: 10, Notes: 1}
	s.Summary, s.Version, s.LastSeq = "Alice and Bob talked.", 3, 1900
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got := New("")
	if err := json.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the checkpoint:\n got %+v\nwant %+v", got, s)
	}
	if len(s.RecentIDs) != maxRecentIDs || s.Total != 300 {
		t.Fatalf("recent ids %d, total %d", len(s.RecentIDs), s.Total)
	}
	// 300 refs must cost a few bytes each, not a JSON object each.
	if len(data) > 300*8+maxRecentIDs*11+400 {
		t.Fatalf("checkpoint is %d bytes", len(data))
	}
}

func TestAdvanceAndDedup(t *testing.T) {
	s := New("s1")
	for i := range 12 {
		h := HashID(string(rune('A' + i)))
		if s.SeenTurn(h) {
			t.Fatal("fresh id seen")
		}
		s.AddTurn(h, TurnRef{Seq: uint64(i + 1)})
	}
	if !s.SeenTurn(HashID("C")) {
		t.Fatal("applied id not seen")
	}
	s.PendingNotes = []NoteRef{{Seq: 100}, {Seq: 101}}
	s.Advance(10, 1)
	if s.Cursor != 10 || s.CoveredThrough != 9 || len(s.Turns) != 2 || s.Turns[0].Seq != 11 || len(s.PendingNotes) != 1 || s.PendingNotes[0].Seq != 101 {
		t.Fatalf("after advance: %+v", s)
	}
	s.LastSeq, s.Version, s.SummarySeq = 12, 3, 40
	s.Reset()
	// The summary's version and outbound sequence go on across a reset: the
	// next summary is v4, published after sequence 40.
	if s.Total != 0 || s.LastSeq != 12 || s.CoveredThrough != -1 || len(s.Turns) != 0 || s.Version != 3 || s.SummarySeq != 40 {
		t.Fatalf("after reset: %+v", s)
	}
}

func TestCorruptRefsAreErrors(t *testing.T) {
	var r TurnRefs
	if err := json.Unmarshal([]byte(`"/w"`), &r); err == nil {
		t.Fatal("corrupt refs accepted")
	}
	var h IDHashes
	if err := json.Unmarshal([]byte(`"AAAA"`), &h); err == nil {
		t.Fatal("short hashes accepted")
	}
}

func TestNewMemoriesDeduplicates(t *testing.T) {
	s := New("s")
	got := s.NewMemories([]string{"Alice prefers tea.", "The budget is 2k"})
	if len(got) != 2 {
		t.Fatalf("first extraction: got %q", got)
	}
	got = s.NewMemories([]string{"alice  prefers TEA", "The deadline is Friday", ""})
	if len(got) != 1 || got[0] != "The deadline is Friday" {
		t.Fatalf("second extraction: got %q, want only the new fact", got)
	}
}

// Memories whose publish failed are forgotten, and only they: a later
// extraction of them is new again.
func TestForgetMemoriesMakesThemNewAgain(t *testing.T) {
	s := New("s")
	s.NewMemories([]string{"Alice prefers tea.", "The budget is 2k"})
	s.ForgetMemories([]string{"The budget is 2k"})
	got := s.NewMemories([]string{"alice prefers tea", "the budget is 2k."})
	if len(got) != 1 || got[0] != "the budget is 2k." {
		t.Fatalf("after forgetting one: got %q, want only the forgotten fact again", got)
	}
}

func TestResetDue(t *testing.T) {
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	hour := 4
	tests := []struct {
		name string
		cfg  *events.SessionConfig
		last string
		now  string
		want string
	}{
		{"manual never", &events.SessionConfig{ResetPolicy: events.ResetManual}, "2026-11-20T10:00:00Z", "2026-11-22T10:00:00Z", ""},
		{"idle after the gap", &events.SessionConfig{ResetPolicy: events.ResetIdle, ResetIdleMinutes: 30}, "2026-11-22T10:00:00Z", "2026-11-22T10:30:00Z", events.ResetIdle},
		{"idle within the gap", &events.SessionConfig{ResetPolicy: events.ResetIdle, ResetIdleMinutes: 30}, "2026-11-22T10:00:00Z", "2026-11-22T10:29:59Z", ""},
		{"daily across the hour", &events.SessionConfig{ResetPolicy: events.ResetDaily, ResetHour: &hour}, "2026-11-22T03:59:00Z", "2026-11-22T04:00:00Z", events.ResetDaily},
		{"daily same side of the hour", &events.SessionConfig{ResetPolicy: events.ResetDaily, ResetHour: &hour}, "2026-11-22T04:01:00Z", "2026-11-23T03:00:00Z", ""},
		{"daily a day later", &events.SessionConfig{ResetPolicy: events.ResetDaily, ResetHour: &hour}, "2026-11-22T05:00:00Z", "2026-11-23T05:00:00Z", events.ResetDaily},
	}
	for _, tt := range tests {
		s := New("s")
		s.Config = tt.cfg
		s.LastEventAt = at(tt.last).UnixMilli()
		if got := s.ResetDue(at(tt.now)); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A checkpoint written before tokens were bounded (a turn with tokens
// 2^31 was accepted then) still loads, with the count it holds; a count
// no int can hold is still corrupt.
func TestOldCheckpointWithHugeTokensLoads(t *testing.T) {
	s := New("s1")
	s.AddTurn(HashID("a"), TurnRef{Seq: 3, At: 1763840000000, Tokens: 1 << 31})
	data, err := s.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("s1", data)
	if err != nil {
		t.Fatalf("a checkpoint with tokens 2^31 does not load: %v", err)
	}
	if got.Turns[0].Tokens != 1<<31 {
		t.Errorf("tokens %d, want 2^31", got.Turns[0].Tokens)
	}
	var r TurnRefs
	raw := base64.RawStdEncoding.EncodeToString([]byte{1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	if err := json.Unmarshal([]byte(`"`+raw+`"`), &r); err == nil {
		t.Errorf("a token count of 2^64-1 decoded as %d", r[0].Tokens)
	}
}

// The tool-exchange state follows applied turns, survives the checkpoint
// and forgets what a fold took.
func TestToolPairsFollowTurnsAndFolds(t *testing.T) {
	s := New("s1")
	at := time.Unix(1763840000, 0)
	for i, k := range []struct{ role, kind string }{
		{"user", ""}, {"assistant", "tool_call"}, {"tool", "tool_result"}, {"assistant", ""},
		{"assistant", "tool_call"}, {"assistant", "tool_call"}, {"tool", "tool_result"},
	} {
		in := events.Inbound{Turn: &events.Turn{V: 1, Session: "s1", TurnID: string(rune('a' + i)), At: at, Speaker: "x", Role: k.role, Kind: k.kind, Text: "t"}}
		if _, err := s.Apply(uint64(i+1), in); err != nil {
			t.Fatal(err)
		}
	}
	var joined []int64
	for i := range s.Total {
		if s.Joined(i) {
			joined = append(joined, i)
		}
	}
	if !reflect.DeepEqual(joined, []int64{2, 5, 6}) || s.Tools.Open != 1 {
		t.Fatalf("joined %v, tools %+v; want [2 5 6] with one call open", joined, s.Tools)
	}
	data, err := s.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("s1", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Tools, s.Tools) {
		t.Fatalf("checkpoint tools %+v, want %+v", got.Tools, s.Tools)
	}
	s.Advance(5, 0)
	if s.Joined(2) || !s.Joined(5) || len(s.Tools.Joined) != 2 {
		t.Fatalf("after folding [0, 5): tools %+v", s.Tools)
	}
	s.Reset()
	if s.Tools != nil {
		t.Fatalf("reset kept tools %+v", s.Tools)
	}
}

// normalizedMemory is the memory's dedup text as memoryID reads it.
func normalizedMemory(m string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.TrimRight(strings.TrimSpace(m), "."))), " ")
}

// memoryID hashes what normalizedMemory would build, so memory ids stored
// in checkpoints keep matching: on random texts of mixed case, white space
// (ASCII and not), full stops, non-ASCII letters and invalid UTF-8.
func TestMemoryIDNormalizes(t *testing.T) {
	pieces := []string{"Alice", "TEA", "prefers", " ", "  ", "\t", "\n", "\u00a0", "\u0085", "\u2003", ".", "..", "É", "Straße",
		"İ", "ǅ", "Σ", "\xff", "\xe2\x82", "\u03a3\u0391", "2k", "\r\n", "\v\f", "ﬃ", "\u1680", "K"}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 200000 {
		var b strings.Builder
		for range rng.IntN(9) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		m := b.String()
		if got, want := memoryID(m), HashID(normalizedMemory(m)); got != want {
			t.Fatalf("text %d %q: id %x, want %x (of %q)", i, m, got, want, normalizedMemory(m))
		}
	}
}

func FuzzMemoryID(f *testing.F) {
	for _, s := range []string{"", "Alice prefers tea.", " alice  PREFERS\ttea ..", "\xff\xfe", "É\u00a0é.", ". . ."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, m string) {
		if got, want := memoryID(m), HashID(normalizedMemory(m)); got != want {
			t.Fatalf("%q: id %x, want %x", m, got, want)
		}
	})
}
