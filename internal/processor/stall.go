package processor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// stallCheck is how long the iterator may stay quiet before the consumer
// is asked whether it should be.
const stallCheck = time.Second

// progress is what the consume loop tells the stall watch.
type progress struct {
	seen    atomic.Uint64 // consumer sequence of the last delivery
	waiting atomic.Bool   // in the iterator's Next, not handing a delivery to a shard
}

// watchStalls asks the consumer, each stallCheck without a new delivery
// while the loop waits for one, whether it is stuck, and rewinds if it is.
// A loop blocked on a busy shard is slow, not stuck: not asked.
func (p *Processor) watchStalls(ctx context.Context, cons jetstream.Consumer, prog *progress, quit <-chan struct{}) {
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
		if why := w.check(ctx, cons, last); why != nil {
			p.requestRewind("delivery_stalled", why)
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
type stallWatch struct {
	suspect string
}

// check is called after each quiet stallCheck; a non-nil error means
// rewind (re-attach at the ack floor: everything unacked comes again).
func (w *stallWatch) check(ctx context.Context, cons jetstream.Consumer, delivered uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		return nil // the next delivery or check will tell
	}
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
