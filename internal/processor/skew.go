package processor

import (
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// Admission is the acceptance rules (limits, clock skew, configure
// checks) of a processor run with c, for the readers that rebuild a
// session from the inbound stream: the processor's own rebuild, and the
// context service's tail and recall index (service.Admission), so they
// never show an event the event loop rejected. The event loop (handle)
// admits by the same rules (Processor.adm).
func (c Config) Admission() state.Admission {
	c = c.withDefaults()
	pol := c.policy()
	return state.Admission{Limits: c.Limits, MaxClockSkew: c.MaxClockSkew,
		CheckConfigure: func(sc *events.SessionConfig) error { return checkConfigure(pol, sc) }}
}

// timeRepaired records that an event's admission brought the session's
// last event time (from, beyond the clock limit: a checkpoint written
// before such times were rejected) back to the event's receive time, so
// its next idle gap is measured from a real time again. The receive time
// is the stream's, so a redelivered event is judged as it was the first
// time.
func (sh *shard) timeRepaired(ls *live, from int64) {
	sh.w.markDirty(ls)
	sh.log.Warn().Str("event", "event_time_limited").Str("session", ls.s.ID).
		Time("last_event_at", time.UnixMilli(from).UTC()).Time("limited_to", time.UnixMilli(ls.s.LastEventAt).UTC()).
		Msg("the checkpoint's last event time was in the future (written before such times were rejected); brought back so idle resets work again")
}
