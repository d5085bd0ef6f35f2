package processor

import (
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
)

// Under a backlog a shard writes its checkpoints once FlushInterval has
// passed rather than at every gap in its input; but when the backlog is
// held back by the consumer's ack window (MaxAckPending), the acks it
// waits for go out without waiting for FlushInterval, or ingest would move
// one window per interval.
func TestBacklogBehindTheAckWindowIsNotHeldByFlushInterval(t *testing.T) {
	r := newRig(t)
	r.turns("s1", 40) // all waiting on the stream before the consumer attaches
	p, err := New(Config{FlushInterval: time.Hour, MaxAckPending: 4}, Deps{JS: r.js, Layout: r.layout, Store: r.store,
		Summarizer: r.sum, Log: r.log, Clock: SystemClock{}, Registry: r.reg, Breaker: r.breaker})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.RunEngine(t, p)
	r.waitSettled("s1", 40, 0)
}
