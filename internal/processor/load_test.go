package processor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// failingLoads stands in front of the store's LoadMany: a session for
// which fail reports true gets a read error (as when the batch's request
// timed out), the batch's other sessions are read from the bucket.
type failingLoads struct {
	load   func(context.Context, []string) []state.Loaded
	fail   func(id string) bool
	failed atomic.Int64 // reads answered with an error
}

func (f *failingLoads) loadMany(ctx context.Context, ids []string) []state.Loaded {
	out := make([]state.Loaded, len(ids))
	var read []string
	var at []int
	for i, id := range ids {
		if f.fail(id) {
			f.failed.Add(1)
			out[i] = state.Loaded{ID: id, Err: fmt.Errorf("load 1 sessions: %w", context.DeadlineExceeded)}
			continue
		}
		read = append(read, id)
		at = append(at, i)
	}
	if len(read) > 0 {
		for j, l := range f.load(ctx, read) {
			out[at[j]] = l
		}
	}
	return out
}

// startFailingLoads runs a processor on the rig whose checkpoint reads go
// through fl.
func (r *rig) startFailingLoads(cfg Config, fl *failingLoads) *Processor {
	r.t.Helper()
	cfg.RetryBackoff, cfg.FlushInterval, cfg.FoldTimeout = 50*time.Millisecond, 5*time.Millisecond, 10*time.Second
	p, err := New(cfg, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log, Clock: SystemClock{}})
	if err != nil {
		r.t.Fatal(err)
	}
	fl.load, p.loadMany = p.loadMany, fl.loadMany
	brokertest.RunEngine(r.t, p)
	return p
}

// consumerInfo reads the processor's durable consumer.
func (r *rig) consumerInfo(p *Processor) *jetstream.ConsumerInfo {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.JS.Consumer(ctx, r.Layout.In, p.ConsumerName())
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return info
}

// A session whose checkpoint read keeps failing for a reason another try
// may fix holds only itself: its read is tried again while the other
// sessions of its shard (read in the same batches or after it) are
// applied, folded, checkpointed and acknowledged; its own events are
// neither applied nor acknowledged meanwhile, and no rewind happens. Once
// a read succeeds its events are applied, each once.
func TestLoadFailureHoldsOnlyItsSession(t *testing.T) {
	r := newRig(t)
	var failing atomic.Bool
	failing.Store(true)
	fl := &failingLoads{fail: func(id string) bool { return id == "x" && failing.Load() }}
	p := r.startFailingLoads(Config{Window: fold.Window{Recent: 4, Batch: 2}, Shards: 1, loadRetries: 1000}, fl)

	r.Turns("x", 3) // the stream's sequences 1 to 3
	r.Eventually("x's read failed and was tried again", func() bool { return fl.failed.Load() >= 2 })
	r.Turns("a", 7) // 7 turns, 4 recent: one batch of 2 is folded
	r.Turns("b", 7)
	r.Settled("a", 7, 2)
	r.Settled("b", 7, 2)
	if n := len(r.Summaries("a")) + len(r.Summaries("b")); n != 2 {
		t.Fatalf("%d summaries for a and b, want one each", n)
	}
	r.Eventually("a's and b's turns acknowledged, x's not", func() bool {
		info := r.consumerInfo(p)
		return info.NumAckPending == 3 && info.AckFloor.Stream == 0
	})
	if s := r.Checkpoint("x"); s.Total != 0 {
		t.Fatalf("x's checkpoint holds %d turns while its state could not be read", s.Total)
	}
	if n := testutil.ToFloat64(p.m.rewinds); n != 0 {
		t.Fatalf("%v rewinds: x's failing read stopped every session", n)
	}
	retries := testutil.ToFloat64(p.m.loadRetries)
	if retries < 1 {
		t.Fatalf("session_load_retries_total = %v, want x's retries counted", retries)
	}

	failing.Store(false)
	r.Settled("x", 3, 0)
	r.Turns("x", 4)
	r.Settled("x", 7, 2)
	r.Eventually("every turn acknowledged", func() bool { return r.consumerInfo(p).NumAckPending == 0 })
	if n := testutil.ToFloat64(p.m.rewinds); n != 0 {
		t.Fatalf("%v rewinds", n)
	}
	if got := p.Applied(); got != 21 {
		t.Fatalf("Applied() = %d after 21 turns", got)
	}
	if n := len(r.Summaries("x")); n != 1 {
		t.Fatalf("%d summaries for x, want 1", n)
	}
}

// A session whose read fails at every try rewinds the consumer once its
// tries are used up, as a failed read always did: its events are then
// delivered again from the ack floor and, once its checkpoint can be read,
// applied each once, beside the other sessions' events.
func TestLoadFailureThatPersistsRewinds(t *testing.T) {
	r := newRig(t)
	var failing atomic.Bool
	failing.Store(true)
	fl := &failingLoads{fail: func(id string) bool { return id == "x" && failing.Load() }}
	p := r.startFailingLoads(Config{Window: fold.Window{Recent: 4, Batch: 2}, Shards: 1, loadRetries: 2}, fl)

	r.Turns("a", 3)
	r.Turns("x", 3)
	r.Eventually("the consumer rewound after x's tries", func() bool { return testutil.ToFloat64(p.m.rewinds) >= 1 })
	if n := testutil.ToFloat64(p.m.loadRetries); n < 2 {
		t.Fatalf("session_load_retries_total = %v before the rewind, want x's 2 retries", n)
	}
	if n := fl.failed.Load(); n < 3 {
		t.Fatalf("x's read failed %d times before the rewind, want the first try and 2 retries", n)
	}
	if s := r.Checkpoint("x"); s.Total != 0 {
		t.Fatalf("x's checkpoint holds %d turns while its state could not be read", s.Total)
	}

	failing.Store(false)
	r.Turns("x", 4) // 7 turns, 4 recent: one batch of 2 is folded
	r.Turns("a", 4)
	r.Settled("x", 7, 2)
	r.Settled("a", 7, 2)
	r.Eventually("every turn acknowledged", func() bool { return r.consumerInfo(p).NumAckPending == 0 })
	if got := p.Applied(); got != 14 {
		t.Fatalf("Applied() = %d after 14 turns", got)
	}
	if n := len(r.Summaries("x")); n != 1 {
		t.Fatalf("%d summaries for x, want 1", n)
	}
}
