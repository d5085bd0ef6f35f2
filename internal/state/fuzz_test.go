package state

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"
)

// canonical is normalize plus nil for every empty slice, so that a
// checkpoint compares equal to its round trip.
func canonical(s *Session) Session {
	c := normalize(*s)
	if len(c.PendingNotes) == 0 {
		c.PendingNotes = nil
	}
	if len(c.RecentIDs) == 0 {
		c.RecentIDs = nil
	}
	return c
}

// FuzzCheckpointDecode: no bytes in the KV bucket may crash a processor
// loading a checkpoint, and whatever decodes is written back (by the hand
// encoder) as a checkpoint that decodes to the same state.
func FuzzCheckpointDecode(f *testing.F) {
	s := New("s1")
	for i := range 12 {
		s.AddTurn(HashID(string(rune('a'+i))), TurnRef{Seq: uint64(10 + 3*i), At: 1763840000000 + int64(i)*1000, Tokens: i})
	}
	s.Advance(4, 0)
	s.Summary, s.Version, s.LastSeq = "Alice and Bob discussed messages 0 to 3.", 1, 43
	data, _ := s.Encode(nil)
	f.Add(data)
	// With a compressed state after the JSON, as Encode writes it, and
	// with an empty compressed block there, which must not decode.
	s.SummaryState = offlineLikeState(40)
	data, _ = s.Encode(nil)
	f.Add(data)
	f.Add([]byte(`{"id":"s1","cursor":0,"total":0,"covered_through":-1,"last_seq":0}` + "\x00fs\x00\x00"))
	f.Add([]byte(`{"id":"s1","cursor":0,"total":0,"covered_through":-1,"last_seq":0}`))
	f.Add([]byte(`{"id":"s1","turns":"/w","total":1}`))
	f.Add([]byte(`{"id":"s1","recent_ids":"AAAA"}`))
	f.Add([]byte(`{"id":"s1","lease":{"fold_id":"f","owner":"o","deadline":"2026-11-22T20:00:00Z","from":0,"to":10},"sealed":1024,"epoch":2,"cursor":10,"total":1100,"turns":"AQID"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode("x", data)
		if err != nil {
			return
		}
		for _, r := range s.Turns {
			if r.Tokens < 0 {
				t.Fatalf("decoded a negative token count from %q", data)
			}
		}
		enc, err := s.Encode(nil)
		if err != nil {
			// Only values encoding/json cannot write either (a time
			// outside years 0-9999) may fail.
			if _, jerr := json.Marshal(s.stored()); jerr == nil {
				t.Fatalf("Encode failed where encoding/json succeeds: %v", err)
			}
			return
		}
		if doc, _ := splitTail(enc); !json.Valid(doc) || !utf8.Valid(doc) {
			t.Fatalf("Encode wrote invalid JSON: %q", enc)
		}
		got, err := Decode("x", enc)
		if err != nil {
			t.Fatalf("re-encoded checkpoint does not decode: %v\n%s", err, enc)
		}
		if a, b := canonical(got), canonical(s.stored()); !reflect.DeepEqual(a, b) {
			t.Fatalf("checkpoint changed on a round trip:\n in %s\nout %s\n%+v\n%+v", data, enc, b, a)
		}
	})
}

// FuzzCheckpointRoundTrip: a checkpoint the processor can build (turn
// refs in stream order, any timestamps and token counts) is stored and
// loaded back exactly.
func FuzzCheckpointRoundTrip(f *testing.F) {
	f.Add("Alice and Bob talked.", uint64(1), uint16(60), int64(1763840000000), int64(7000), uint16(12), uint16(10), "f1")
	f.Add("", uint64(1<<62), uint16(3), int64(-1), int64(-1<<40), uint16(0), uint16(0), "")
	f.Add("say \"hi\"\n\t\u2028 ünïcödé \x00", uint64(0), uint16(600), int64(1<<62), int64(1<<61), uint16(65535), uint16(512), "lease")
	f.Fuzz(func(t *testing.T, summary string, seq uint64, n uint16, at, step int64, tokens, cursor uint16, foldID string) {
		if !utf8.ValidString(summary) || !utf8.ValidString(foldID) {
			return // the processor only stores summaries that came through JSON
		}
		s := New("sess-1")
		for i := range int(n % 2048) {
			s.AddTurn(uint64(i)*0x9e3779b97f4a7c15, TurnRef{Seq: seq + uint64(i), At: at + int64(i)*step, Tokens: int(tokens) * (i % 3)})
		}
		s.Advance(int64(min(int(cursor), int(s.Total))), 0)
		s.Summary, s.Version, s.LastSeq = summary, uint64(cursor)/4, seq+uint64(n)
		if foldID != "" {
			s.Lease = &Lease{FoldID: foldID, Owner: "o", Deadline: time.UnixMilli(1763840000000 + at%(1<<40)).UTC(), From: s.Cursor, To: s.Cursor + 10}
		}
		enc, err := s.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		got := New("")
		if err := json.Unmarshal(enc, got); err != nil {
			t.Fatalf("does not decode: %v\n%s", err, enc)
		}
		if a, b := canonical(got), canonical(s); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the checkpoint:\n%+v\n%+v", b, a)
		}
	})
}
