package processor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
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

// keptDLQ is a JetStream that keeps every dead letter at once.
type keptDLQ struct{ jetstream.JetStream }

func (keptDLQ) PublishMsg(ctx context.Context, _ *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{}, nil
}

// deadlineStream is a stream holding nothing that records the time its
// reads were given.
type deadlineStream struct {
	jetstream.Stream
	left []time.Duration
}

func (s *deadlineStream) GetMsg(ctx context.Context, _ uint64, _ ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(time.Hour)
	}
	s.left = append(s.left, time.Until(dl))
	return nil, jetstream.ErrMsgNotFound
}

func (s *deadlineStream) GetLastMsgForSubject(ctx context.Context, _ string) (*jetstream.RawStreamMsg, error) {
	return nil, jetstream.ErrMsgNotFound
}

type rebuiltLoop struct {
	loadLoop
	rerr error
	n    int
}

func (l *rebuiltLoop) rebuilt(_ *state.CorruptError, _ *state.Session, _ int, rerr error, _ summaryRecord, _ error) {
	l.rerr, l.n = rerr, l.n+1
}
func (l *rebuiltLoop) withSession(string, func(*live)) {}
func (l *rebuiltLoop) handle(inMsg)                    {}

// A quarantined session's rebuild reads the inbound stream for as long as
// rebuildSession allows (30 s), as it did before it took a context: not
// for what is left of the aside call's 10 s, which the dead letter of the
// checkpoint has already spent from.
func TestQuarantineRebuildReadsWithItsOwnTime(t *testing.T) {
	subjects, _ := events.NewSubjects("fold")
	layout := broker.NewLayout(subjects)
	in := &deadlineStream{}
	loop := &rebuiltLoop{}
	l := &loader{loop: loop, aside: newAside(nil, zerolog.Nop()), rec: &recorder{out: in, subj: layout.Subjects},
		js: keptDLQ{}, inStream: in, layout: layout, adm: state.DefaultAdmission(), m: newMetrics(prometheus.NewRegistry()), log: zerolog.Nop()}
	l.quarantine(&state.CorruptError{ID: "bad", Revision: 3, Data: []byte("{"), Err: errors.New("bad")}, 100)
	l.aside.land(<-l.aside.done)
	if loop.n != 1 || loop.rerr != nil || len(in.left) == 0 {
		t.Fatalf("rebuilt %d times, error %v, %d reads", loop.n, loop.rerr, len(in.left))
	}
	if in.left[0] < 20*time.Second {
		t.Fatalf("the rebuild's read was given %v, want rebuildSession's 30 s", in.left[0])
	}
}
