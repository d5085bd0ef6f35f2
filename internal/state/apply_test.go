package state

import (
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

func TestApply(t *testing.T) {
	at := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	turn := func(id string) events.Inbound {
		return events.Inbound{Kind: events.KindTurn, Turn: &events.Turn{TurnID: id, At: at, Tokens: 3}}
	}
	ctl := func(op string) events.Inbound {
		return events.Inbound{Kind: events.KindControl, Control: &events.Control{Op: op, Config: &events.SessionConfig{BatchSize: 4}}}
	}
	note := events.Inbound{Kind: events.KindNote, Note: &events.Note{NoteID: "n", At: at}}
	s := New("s1")
	s.Lease = &Lease{FoldID: "f"}
	steps := []struct {
		in     events.Inbound
		effect Effect
		code   string
	}{
		{turn("a"), EffectTurn, ""},
		{turn("a"), EffectDuplicate, ""},
		{note, EffectNote, ""},
		{ctl(events.OpConfigure), EffectControl, ""},
		{ctl(events.OpGenerate), EffectControl, ""},
		{ctl(events.OpEnd), EffectControl, ""},
		{turn("b"), EffectNone, events.CodeSessionEnded},
		{ctl(events.OpEnd), EffectNone, events.CodeSessionEnded},
		{ctl(events.OpReset), EffectControl, ""},
		{turn("a"), EffectTurn, ""}, // a new transcript: the old ids are forgotten
	}
	for i, st := range steps {
		seq := uint64(i + 1)
		effect, err := s.Apply(seq, st.in)
		if effect != st.effect {
			t.Fatalf("step %d: effect %v, want %v", i, effect, st.effect)
		}
		if st.code != "" {
			if ve, ok := events.AsValidation(err); !ok || ve.Code != st.code {
				t.Fatalf("step %d: error %v, want %s", i, err, st.code)
			}
			if s.LastSeq == seq {
				t.Fatalf("step %d: a refused event moved LastSeq", i)
			}
			continue
		}
		if err != nil || s.LastSeq != seq {
			t.Fatalf("step %d: err %v, last seq %d", i, err, s.LastSeq)
		}
		switch i {
		case 2:
			if s.Total != 1 || len(s.PendingNotes) != 1 || s.Turns[0].Tokens != 3 || s.Turns[0].At != at.UnixMilli() {
				t.Fatalf("after a turn, its duplicate and a note: %+v", s)
			}
		case 3:
			if s.Config == nil || s.Config.BatchSize != 4 {
				t.Fatal("configure not applied")
			}
		case 5:
			if !s.Ended || s.Lease != nil {
				t.Fatal("end did not end the session and drop its lease")
			}
		case 8:
			if s.Ended || s.Total != 0 || s.Epoch != 1 || s.Config == nil {
				t.Fatalf("reset: %+v", s)
			}
		}
	}
}

// A checkpoint that holds a last event time in the future (written before
// such events were rejected) reset its session at the poisoned event and
// then never again: every real gap measured from 9999 is negative.
// LimitEventTime brings it back to the receive time of the next event, and
// from there a real gap resets the session again.
func TestIdleResetAfterAFutureEventTime(t *testing.T) {
	received := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	turn := func(id string, at time.Time) events.Inbound {
		return events.Inbound{Kind: events.KindTurn, Turn: &events.Turn{TurnID: id, At: at, Tokens: 3}}
	}
	s := New("s1")
	s.Config = &events.SessionConfig{ResetPolicy: events.ResetIdle, ResetIdleMinutes: 60}
	if _, err := s.Apply(1, turn("a", received.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	// The poison, as an old processor applied it.
	if _, err := s.Apply(2, turn("future", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	if why := s.ResetDue(received.Add(5 * time.Hour)); why != "" {
		t.Fatalf("reset due %q measured from 9999: the bug is gone without the repair?", why)
	}
	if s.LimitEventTime(received, 0) {
		t.Error("repaired with the skew check off")
	}
	if !s.LimitEventTime(received, 5*time.Minute) {
		t.Fatal("a last event time in 9999 was not repaired")
	}
	if got := time.UnixMilli(s.LastEventAt).UTC(); !got.Equal(received) {
		t.Errorf("last event time %s, want the receive time %s", got, received)
	}
	if s.LimitEventTime(received, 5*time.Minute) {
		t.Error("repaired twice")
	}
	if why := s.ResetDue(received.Add(30 * time.Minute)); why != "" {
		t.Errorf("reset %q after 30 minutes of a 60-minute idle policy", why)
	}
	if why := s.ResetDue(received.Add(5 * time.Hour)); why != events.ResetIdle {
		t.Errorf("a 5-hour gap after the repair: reset %q, want idle", why)
	}
	// Within the skew nothing is touched: a bot clock a minute fast is fine.
	s.LastEventAt = received.Add(time.Minute).UnixMilli()
	if s.LimitEventTime(received, 5*time.Minute) || s.LastEventAt != received.Add(time.Minute).UnixMilli() {
		t.Error("a last event time within the skew was changed")
	}
}
