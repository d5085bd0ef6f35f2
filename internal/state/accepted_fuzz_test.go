package state

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// FuzzAcceptedEventsRoundTrip: every event the processor's validation
// accepts, applied to a session, gives a checkpoint that the KV codec
// (Encode, Decode) and the in-memory codec (Pack, Unpack) both give back
// exactly. A value validation lets through and the codec cannot read back
// (a tokens ≥ 2^31 once was) would make the session unloadable; here it
// fails the test instead. The numbers come in as raw JSON text, as a bot
// would send them.
func FuzzAcceptedEventsRoundTrip(f *testing.F) {
	f.Add("12", "5400", "2026-11-22T20:00:00Z", uint8(3), "user", int64(7000), true)
	f.Add("10000000", "10000000", "9999-12-31T23:59:59.999999999Z", uint8(1), "assistant", int64(1), false)
	f.Add("2147483648", "0", "2026-11-22T20:00:00Z", uint8(2), "tool", int64(-1), true)
	f.Add("1", "1", "0001-01-01T00:00:00.001Z", uint8(2), "tool", int64(-1), true)
	f.Add("0", "9223372036854775807", "2026-11-22T20:00:00+14:00", uint8(200), "system", int64(1<<40), true)
	f.Add("1e3", "-1", "1970-01-01T00:00:00Z", uint8(0), "user", int64(0), false)
	f.Fuzz(func(t *testing.T, tokens, contextTokens, at string, n uint8, role string, step int64, note bool) {
		turn := func(i int) []byte {
			return fmt.Appendf(nil, `{"v":1,"session":"s1","turn_id":"t%d","at":%s,"speaker":"Alice","role":%s,"text":"hi","tokens":%s,"context_tokens":%s}`,
				i, strconv.Quote(at), strconv.Quote(role), tokens, contextTokens)
		}
		in, err := events.DecodeInbound(events.KindTurn, "s1", turn(0), events.Limits{})
		if err != nil {
			return // rejected: never reaches a checkpoint
		}
		s := New("s1")
		seq := uint64(1)
		apply := func(in events.Inbound) {
			if _, err := s.Apply(seq, in); err != nil {
				t.Fatalf("an accepted event was refused by Apply: %v", err)
			}
			seq++
		}
		base := in.Turn.At
		for i := range int(n%64) + 1 {
			in, err := events.DecodeInbound(events.KindTurn, "s1", turn(i), events.Limits{})
			if err != nil {
				t.Fatalf("turn %d rejected where turn 0 was accepted: %v", i, err)
			}
			// Later turns move by step from the first: the deltas the
			// codec writes span any two accepted times.
			if i%2 == 1 && step != 0 {
				if moved := base.Add(time.Duration(step) * time.Millisecond); validTime(moved) {
					in.Turn.At = moved
				}
			}
			apply(in)
			if note && i%5 == 0 {
				nt, err := events.DecodeInbound(events.KindNote, "s1",
					fmt.Appendf(nil, `{"v":1,"session":"s1","note_id":"n%d","at":%s,"text":"a map"}`, i, strconv.Quote(at)), events.Limits{})
				if err != nil {
					t.Fatalf("note rejected where a turn at the same time was accepted: %v", err)
				}
				apply(nt)
			}
		}
		s.Advance(s.Total/2, 0)
		enc, err := s.Encode(nil)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := Decode("s1", enc)
		if err != nil {
			t.Fatalf("a checkpoint of accepted events does not decode: %v\n%s", err, enc)
		}
		if a, b := canonical(got), canonical(s.stored()); !reflect.DeepEqual(a, b) {
			t.Fatalf("checkpoint changed on a round trip:\n%+v\n%+v", b, a)
		}
		packed, err := s.Pack(nil)
		if err != nil {
			t.Fatalf("pack: %v", err)
		}
		un, err := Unpack("s1", packed)
		if err != nil {
			t.Fatalf("a packed session of accepted events does not unpack: %v", err)
		}
		if a, b := canonical(un), canonical(s); !reflect.DeepEqual(a, b) {
			t.Fatalf("packed session changed on a round trip:\n%+v\n%+v", b, a)
		}
	})
}

// validTime: a time RFC 3339 can carry, as a turn's at must be.
func validTime(t time.Time) bool { return t.Year() >= 0 && t.Year() <= 9999 }
