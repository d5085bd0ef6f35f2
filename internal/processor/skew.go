package processor

import (
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// checkClock rejects an event dated more than MaxClockSkew after the
// stream stored it (events.CheckClock says why), and repairs a session
// whose checkpoint already holds such a time: its last event time is
// brought back to the event's receive time, so its next idle gap is
// measured from a real time again. The receive time is the
// stream's, so a redelivered event is judged as it was the first time.
func (sh *shard) checkClock(ls *live, m inMsg, in events.Inbound) error {
	skew := sh.p.cfg.MaxClockSkew
	if skew <= 0 || m.received.IsZero() {
		return nil
	}
	if err := in.CheckClock(m.received, skew); err != nil {
		return err
	}
	if from := ls.s.LastEventAt; ls.s.LimitEventTime(m.received, skew) {
		sh.markDirty(ls)
		sh.p.log.Warn().Str("event", "event_time_limited").Str("session", ls.s.ID).
			Time("last_event_at", time.UnixMilli(from).UTC()).Time("limited_to", time.UnixMilli(ls.s.LastEventAt).UTC()).
			Msg("the checkpoint's last event time was in the future (written before such times were rejected); brought back so idle resets work again")
	}
	return nil
}
