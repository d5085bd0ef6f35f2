package state

import (
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/tokens"
)

// Effect says what applying an inbound event did to a session.
type Effect int

// Effects of Apply.
const (
	EffectNone      Effect = iota
	EffectTurn             // a new turn was added
	EffectDuplicate        // the turn_id was applied before: nothing changed but LastSeq
	EffectNote             // a note is pending for the next fold
	EffectControl          // a control op; end, reset and configure are already applied
)

// Apply applies one validated inbound event, found at inbound stream
// sequence seq, to the session; the event has passed the processor's
// acceptance rules (Admission) first. These are the state rules the
// processor follows and the context service replays for the events the
// processor has not checkpointed yet; side effects (logs, lifecycle events, cancelling a
// running fold) stay with the caller. An event for an ended session, other
// than reset, is refused and changes nothing.
//
// A session whose reset policy (daily, idle) says its life is over is
// reset before the event is applied; ResetDue tells the caller beforehand.
func (s *Session) Apply(seq uint64, in events.Inbound) (Effect, error) {
	if s.Ended && (in.Control == nil || in.Control.Op != events.OpReset) {
		return EffectNone, &events.ValidationError{Code: events.CodeSessionEnded, Field: "session",
			Reason: "session " + s.ID + " has ended; send a control event with op reset to start it again"}
	}
	if why := s.ResetDue(EventTime(in)); why != "" {
		s.Reset() // the reset policy's boundary passed since the last event
	}
	s.LastSeq = seq
	switch {
	case in.Turn != nil:
		h := HashID(in.Turn.TurnID)
		if s.SeenTurn(h) {
			return EffectDuplicate, nil
		}
		// The token modes need every turn's size at trigger time; the
		// bot's own count wins, else the chars/4×1.2 estimate.
		toks := in.Turn.Tokens
		if toks == 0 {
			toks = tokens.Heuristic(in.Turn.Text)
		}
		s.noteTool(in.Turn.Role, in.Turn.Kind)
		s.AddTurn(h, TurnRef{Seq: seq, At: in.Turn.At.UnixMilli(), Tokens: toks})
		if in.Turn.Role == "assistant" {
			s.Exchanges++ // an exchange is complete when the bot has answered
		}
		if in.Turn.ContextTokens > 0 {
			s.ContextTokens = in.Turn.ContextTokens
		}
		s.touch(in.Turn.At)
		return EffectTurn, nil
	case in.Note != nil:
		s.PendingNotes = append(s.PendingNotes, NoteRef{Seq: seq, At: in.Note.At.UnixMilli()})
		s.touch(in.Note.At)
		return EffectNote, nil
	case in.Control != nil:
		switch in.Control.Op {
		case events.OpEnd:
			s.Ended = true
			s.Lease = nil
		case events.OpReset:
			s.Reset()
		case events.OpConfigure:
			s.Config = in.Control.Config
		}
		s.touch(in.Control.At)
		return EffectControl, nil
	}
	return EffectNone, nil
}

// EventTime is the bot's timestamp of an event (zero if it has none).
func EventTime(in events.Inbound) time.Time { return in.At() }

// touch keeps the latest event time: an event that arrives late with an
// earlier at must not look like a gap to the next one. Because it only
// moves forward, a time in the future would stop every idle reset until
// then; the processor rejects such events (events.CheckClock) and
// LimitEventTime repairs a checkpoint that holds one.
func (s *Session) touch(at time.Time) {
	if ms := at.UnixMilli(); !at.IsZero() && ms > s.LastEventAt {
		s.LastEventAt = ms
	}
}

// LimitEventTime repairs a last event time that no accepted event could
// have set: later than received (when the event at hand was received)
// plus maxSkew. It is set back to received, and LimitEventTime reports
// whether it was. A checkpoint written before future times were rejected
// can hold one (a turn dated 9999-12-31); measured from it, no real gap
// would ever reset the session.
func (s *Session) LimitEventTime(received time.Time, maxSkew time.Duration) bool {
	if received.IsZero() || maxSkew <= 0 || s.LastEventAt <= received.Add(maxSkew).UnixMilli() {
		return false
	}
	s.LastEventAt = received.UnixMilli()
	return true
}
