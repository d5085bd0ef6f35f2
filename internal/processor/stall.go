package processor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// stallCheck is how long the iterator may stay quiet before the consumer
// is asked whether it should be.
const stallCheck = time.Second

// stallInfoTimeout bounds one question to the consumer: an answer that
// takes longer counts as no answer.
const stallInfoTimeout = 3 * time.Second

// stallUnanswered is how many quiet checks in a row may fail to read the
// consumer before the watch rewinds anyway. A consumer that cannot be read
// for that long (no leader after a failover, a meta group that lost it)
// cannot be trusted to deliver either, and nothing else would notice: the
// iterator waits on a pull the server may never answer. A rewind re-creates
// the consumer at the ack floor, which is always safe.
const stallUnanswered = 3

// progress is what the consume loop tells the stall watch.
type progress struct {
	seen    atomic.Uint64 // consumer sequence of the last delivery
	waiting atomic.Bool   // in the iterator's Next, not handing a delivery to a shard
}

// watchStalls asks the consumer, each stallCheck without a new delivery
// while the loop waits for one, whether it is stuck, and rewinds if it is.
// A loop blocked on a busy shard is slow, not stuck: not asked.
func (cm *consumers) watchStalls(ctx context.Context, cons jetstream.Consumer, prog *progress, quit <-chan struct{}) {
	tick := time.NewTicker(stallCheck)
	defer tick.Stop()
	var w stallWatch
	last := prog.seen.Load()
	for {
		select {
		case <-quit:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if cur := prog.seen.Load(); cur != last || !prog.waiting.Load() {
			last, w = cur, stallWatch{}
			continue
		}
		why := w.check(ctx, cons, last)
		if w.failed == 1 && ctx.Err() == nil {
			cm.log.Warn().Err(w.err).Str("event", "stall_check_failed").
				Msg("could not read the consumer while no delivery came; asking again, and rewinding if it stays unanswered")
		}
		if why != nil {
			cm.requestRewind("delivery_stalled", why)
			return
		}
	}
}

// stallWatch tells a quiet consumer from a stuck one. Seen under load on
// one server (docs/benchmarks.md): deliveries the client never hands over
// (dropped as a slow consumer when the iterator's buffer is full) or a
// pull request the server no longer holds. The first leaves the last
// events of a burst unacked until AckWait (30 s) with no later delivery to
// reveal the gap; the second stops delivery until the client misses two
// heartbeats. Either way the same answer, twice in a row, means stuck.
// Seen on a cluster after a node went away: the consumer cannot be read
// at all (gone, or no leader), while the pull the iterator holds goes
// unanswered; stallUnanswered such checks in a row mean stuck too.
type stallWatch struct {
	suspect string
	failed  int   // quiet checks in a row whose question went unanswered
	err     error // the last unanswered question's error
}

// check is called after each quiet stallCheck; a non-nil error means
// rewind (re-attach at the ack floor: everything unacked comes again).
func (w *stallWatch) check(ctx context.Context, cons jetstream.Consumer, delivered uint64) error {
	ctx, cancel := context.WithTimeout(ctx, stallInfoTimeout)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return nil // stopping
		}
		w.failed++
		w.err = err
		key := "unanswered"
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// The iterator is pulling from a consumer that does not
			// exist: nothing will come. Confirmed once, as any answer.
			key = "gone"
		}
		if (key == "gone" && w.suspect == key) || w.failed >= stallUnanswered {
			return fmt.Errorf("consumer stalled: %d checks in a row could not read it: %w", w.failed, err)
		}
		w.suspect = key
		return nil
	}
	w.failed, w.err = 0, nil
	var key, why string
	switch {
	case info.Delivered.Consumer > delivered:
		key = fmt.Sprint("lost ", info.Delivered.Consumer)
		why = fmt.Sprintf("the consumer delivered up to %d, this engine saw up to %d", info.Delivered.Consumer, delivered)
	case info.NumPending > 0 && info.NumWaiting == 0 && info.NumAckPending < info.Config.MaxAckPending:
		key = "no pull"
		why = fmt.Sprintf("%d events wait on the stream and no pull request is open", info.NumPending)
	}
	if key == "" || key != w.suspect {
		w.suspect = key // first sighting: deliveries may still be on the way
		return nil
	}
	return fmt.Errorf("consumer stalled: %s", why)
}
