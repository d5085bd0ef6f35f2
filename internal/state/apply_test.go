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
