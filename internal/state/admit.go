package state

import (
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Admission is the processor's acceptance rules for an inbound event,
// beyond what Apply decides: decoding within Limits, the clock check on
// at (events.Inbound.CheckClock) and the check of a configure op against
// the deployment's settings. Every reader that rebuilds a session from
// the inbound stream (the processor's own rebuild, the context service's
// tail, the recall index's replay) admits events by the same rules as
// the processor's event loop, so what they show is what the processor
// applied: an event it dead-lettered never reaches their state.
type Admission struct {
	Limits events.Limits
	// MaxClockSkew: <= 0 accepts any at.
	MaxClockSkew time.Duration
	// CheckConfigure refuses a configure op the processor refuses; nil
	// accepts every configure that decodes.
	CheckConfigure func(*events.SessionConfig) error
}

// DefaultAdmission is the processor's default rules, for readers not told
// the deployment's.
func DefaultAdmission() Admission {
	return Admission{Limits: events.DefaultLimits(), MaxClockSkew: events.DefaultMaxClockSkew}
}

// Admit decodes the event of subject kind stored by the inbound stream at
// received, and checks it against s (the session it is for, before
// Apply): the processor's event loop admits by this too. Once the event's
// own time passes the clock check, s's last event time is repaired if it
// is beyond the clock limit (LimitEventTime; repaired reports it), even if
// a configure check then refuses the event: the repair is the session's,
// not the event's. On success the caller then calls s.Apply.
func (a Admission) Admit(s *Session, kind, session string, data []byte, received time.Time) (in events.Inbound, repaired bool, err error) {
	in, err = events.DecodeInbound(kind, session, data, a.Limits)
	if err != nil {
		return in, false, err
	}
	if err := in.CheckClock(received, a.MaxClockSkew); err != nil {
		return in, false, err
	}
	repaired = s.LimitEventTime(received, a.MaxClockSkew)
	if c := in.Control; a.CheckConfigure != nil && c != nil && c.Op == events.OpConfigure && !s.Ended {
		if err := a.CheckConfigure(c.Config); err != nil {
			return in, repaired, err
		}
	}
	return in, repaired, nil
}
