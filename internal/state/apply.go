package state

import "github.com/foldstream/foldstream/internal/events"

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
// sequence seq, to the session. These are the state rules the processor
// follows and the context service replays for the events the processor has
// not checkpointed yet; side effects (logs, lifecycle events, cancelling a
// running fold) stay with the caller. An event for an ended session, other
// than reset, is refused and changes nothing.
func (s *Session) Apply(seq uint64, in events.Inbound) (Effect, error) {
	if s.Ended && (in.Control == nil || in.Control.Op != events.OpReset) {
		return EffectNone, &events.ValidationError{Code: events.CodeSessionEnded, Field: "session",
			Reason: "session " + s.ID + " has ended; send a control event with op reset to start it again"}
	}
	s.LastSeq = seq
	switch {
	case in.Turn != nil:
		h := HashID(in.Turn.TurnID)
		if s.SeenTurn(h) {
			return EffectDuplicate, nil
		}
		s.AddTurn(h, TurnRef{Seq: seq, At: in.Turn.At.UnixMilli(), Tokens: in.Turn.Tokens})
		return EffectTurn, nil
	case in.Note != nil:
		s.PendingNotes = append(s.PendingNotes, NoteRef{Seq: seq, At: in.Note.At.UnixMilli()})
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
		return EffectControl, nil
	}
	return EffectNone, nil
}
