package processor

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Deps are the parts the processor is given, never creates.
type Deps struct {
	JS jetstream.JetStream
	// FoldJS, when set, is a JetStream context on a second connection for
	// the fold path's summary-updated publishes: on the ingest connection
	// they would wait behind thousands of acks and checkpoint writes each
	// way. Nil uses JS. (A fold's lease is not written on its own: it
	// reaches KV with the session's next checkpoint, on JS.)
	FoldJS     jetstream.JetStream
	Layout     broker.Layout
	Store      *state.Store
	Summarizer fold.Summarizer
	Tokens     TokenCounter
	Log        zerolog.Logger
	Clock      Clock
	Registry   prometheus.Registerer
	// Breaker guards the summarizer's endpoint (one per endpoint: a process
	// with several engines passes the same one to each, and serves its
	// Health). Nil makes one from Config's Breaker* settings.
	Breaker *retry.Breaker
	// Shared, when set, holds the metrics and the fold slots of several
	// engines in one process (one per owned partition); Registry is then
	// unused.
	Shared *Shared
	// BeforeAttach, when set, is called before the consumer is (re)created;
	// an error stops the attach. A partition engine checks that its
	// instance still owns the partition, so a fenced engine never deletes
	// the consumer a new owner attached.
	BeforeAttach func(context.Context) error
}

// Shared is what the engines of one process share: metrics registered
// once, and one bound on concurrent folds.
type Shared struct {
	m        *metrics
	slots    *foldSlots
	mem      *memRelease
	rebuilds chan struct{} // summarizer states being built again from the stream (earlierTurns), at most maxRebuilds
}

// NewShared registers the metrics on reg and bounds folds across engines.
func NewShared(reg prometheus.Registerer, maxConcurrentFolds int) *Shared {
	if maxConcurrentFolds <= 0 {
		maxConcurrentFolds = Config{}.withDefaults().MaxConcurrentFolds
	}
	return &Shared{m: newMetrics(reg), slots: newFoldSlots(maxConcurrentFolds), mem: new(memRelease), rebuilds: make(chan struct{}, maxRebuilds)}
}

// Processor consumes inbound events and folds sessions.
type Processor struct {
	cfg    Config
	js     jetstream.JetStream
	layout broker.Layout
	subj   events.Subjects
	store  *state.Store
	// loadMany reads checkpoints for the shards' loaders: the store's
	// LoadMany (tests wrap it to make reads fail).
	loadMany func(ctx context.Context, ids []string) []state.Loaded
	foldJS   jetstream.JetStream // the fold path's publishes (Deps.FoldJS)
	sum      fold.Summarizer
	// breaker stops model calls while the endpoint refuses every request
	// (folding.go: startFold asks it, runFold reports to it).
	breaker *retry.Breaker
	tokens  TokenCounter
	log     zerolog.Logger
	clock   Clock
	m       *metrics

	policy fold.Policy // the deployment's; sessions may override it
	// adm is the deployment's acceptance rules (Config.Admission): the
	// event loop admits by them, as every reader that rebuilds a session
	// from the stream does.
	adm state.Admission
	// sessionPolicy is policy as a session without overrides folds with
	// (resolve), computed once.
	sessionPolicy fold.Policy
	asker         *contextsource.Asker

	inStream jetstream.Stream
	outStrm  jetstream.Stream
	shards   []*shard
	dl       *deadLetterer // keeps rejected messages off the event loops
	folds    sync.WaitGroup
	slots    *foldSlots    // fold concurrency limit (slots.go)
	mem      *memRelease   // returns memory freed by idle compaction (idle.go)
	rebuilds chan struct{} // summarizer states being built again (Shared's)

	cons *consumers // the consumer manager (consumer.go)
	// abortFolds cancels in-flight folds at once (Abort), set by Run.
	abortMu    sync.Mutex
	abortFolds context.CancelFunc
	aborted    bool
	applied    atomic.Uint64 // events applied, for tests and the bench
	landed     atomic.Uint64 // folds completed
	ready      chan struct{}

	foldObs func(FoldTiming) // ObserveFolds (publish.go), for cmd/bench
}

// New validates the configuration and wires the processor.
func New(cfg Config, d Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if d.JS == nil || d.Store == nil || d.Summarizer == nil {
		return nil, errors.New("processor: JetStream, store and summarizer are required")
	}
	if d.Clock == nil {
		d.Clock = SystemClock{}
	}
	if d.FoldJS == nil {
		d.FoldJS = d.JS
	}
	if d.Tokens == nil {
		d.Tokens = (*tokens.Counter)(nil) // counts with the chars/4×1.2 heuristic
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = nuid.Next()
	}
	p := &Processor{
		policy: cfg.policy(), adm: cfg.Admission(), asker: contextsource.NewAsker(d.JS.Conn(), d.Log),
		cfg: cfg, js: d.JS, layout: d.Layout, subj: d.Layout.Subjects, store: d.Store, loadMany: d.Store.LoadMany,
		foldJS: d.FoldJS,
		sum:    d.Summarizer, tokens: d.Tokens, log: d.Log, clock: d.Clock,
		ready: make(chan struct{}),
	}
	p.sessionPolicy = p.resolve(p.policy)
	if p.sessionPolicy.Mode != p.policy.Mode {
		d.Log.Warn().Str("event", "evict_fallback").Str("configured_mode", string(p.policy.Mode)).Str("mode", string(p.sessionPolicy.Mode)).
			Msg("the configured mode needs recall (the context service, --service) to find the turns it drops; without it that is amnesia, so sessions fold in the mode it falls back to")
	}
	if d.Shared != nil {
		p.m, p.slots, p.mem, p.rebuilds = d.Shared.m, d.Shared.slots, d.Shared.mem, d.Shared.rebuilds
	} else {
		p.m, p.slots, p.mem, p.rebuilds = newMetrics(d.Registry), newFoldSlots(cfg.MaxConcurrentFolds), new(memRelease), make(chan struct{}, maxRebuilds)
	}
	p.breaker = d.Breaker
	if p.breaker == nil {
		p.breaker = retry.NewBreaker(retry.BreakerConfig{
			Endpoint: d.Summarizer.Name(), OpenFor: cfg.BreakerOpenFor, MaxOpenFor: cfg.BreakerMaxOpenFor,
		}, d.Log)
	}
	p.m.breaker.Store(p.breaker)
	p.cons = newConsumers(cfg, d.JS, d.Layout, d.BeforeAttach, d.Log, p.m.rewinds)
	return p, nil
}

// Health reports whether the summarizer is usable, and why not (its
// breaker is open: the endpoint refuses every request).
func (p *Processor) Health() (ok bool, reason string) { return p.breaker.Health() }

// Abort makes a running engine land nothing more: in-flight folds are
// cancelled now (their leases are cleared, nothing moves), where a plain
// cancel of Run's context would let them finish within ShutdownGrace.
// Called when the engine's partition was lost; Run's context must still
// be cancelled to stop it.
func (p *Processor) Abort() {
	p.abortMu.Lock()
	defer p.abortMu.Unlock()
	p.aborted = true
	if p.abortFolds != nil {
		p.abortFolds()
	}
}

// Ready is closed once the consumer is attached and events flow.
func (p *Processor) Ready() <-chan struct{} { return p.ready }

// Applied is the number of inbound events applied so far, each counted
// once: an event applied again after a rewind (its checkpoint not written
// yet when the rewind came) is not counted again.
func (p *Processor) Applied() uint64 { return p.applied.Load() }

// Folds is the number of folds completed so far.
func (p *Processor) Folds() uint64 { return p.landed.Load() }

// Run consumes until ctx is cancelled, then shuts down gracefully: stop
// fetching, let in-flight folds finish within ShutdownGrace (else abandon
// them: lease cleared, nothing moved), flush checkpoints, ack, return; the
// fold slots' goroutines have ended by then unless another engine sharing
// them (Deps.Shared) still runs.
func (p *Processor) Run(ctx context.Context) error {
	var err error
	if p.inStream, err = p.js.Stream(ctx, p.layout.In); err != nil {
		return fmt.Errorf("inbound stream %s: %w", p.layout.In, err)
	}
	if p.outStrm, err = p.js.Stream(ctx, p.layout.Out); err != nil {
		return fmt.Errorf("outbound stream %s: %w", p.layout.Out, err)
	}

	// The fold slots' goroutines end when the last engine using them
	// stops, after everything below (deferred first, so run last).
	p.slots.open()
	defer p.slots.close()
	// Folds get their own context: shutdown cancels them only after the
	// grace period, not the moment ctx ends.
	foldCtx, cancelFolds := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFolds()
	p.abortMu.Lock()
	p.abortFolds = cancelFolds
	if p.aborted {
		cancelFolds()
	}
	p.abortMu.Unlock()
	// Dead-letter retries end with the shutdown grace, like folds.
	dlCtx, cancelDL := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDL()
	p.dl = newDeadLetterer(p, dlCtx, p.cfg.deadLetterAttempts)
	go p.dl.run()
	p.shards = make([]*shard, p.cfg.Shards)
	var wg sync.WaitGroup
	for i := range p.shards {
		p.shards[i] = newShard(p, i, foldCtx)
		wg.Add(1)
		go func(sh *shard) {
			defer wg.Done()
			sh.run()
		}(p.shards[i])
	}
	stopping := make(chan struct{})
	stopShards := func() {
		close(stopping)
		for _, sh := range p.shards {
			close(sh.in)
		}
		wg.Wait()
		p.dl.stop() // after the loops: nothing is handed over any more
	}

	err = p.cons.run(ctx, p.inStream, consumerHooks{
		dispatch: p.dispatch,
		attached: func(ctx context.Context, floor uint64, first bool) {
			// After a rewind too: a session whose events are all
			// checkpointed gets no event that would re-check it, yet may
			// have folds to do.
			go p.resumeDue(ctx, stopping)
			if first {
				p.log.Info().Str("event", "processor_started").Str("instance", p.cfg.InstanceID).Str("consumer", p.ConsumerName()).
					Uint64("resume_after_seq", floor).Int("shards", p.cfg.Shards).Int("recent_window", p.cfg.Window.Recent).
					Int("batch_size", p.cfg.Window.Batch).Int("max_summary_chars", p.cfg.Window.MaxSummaryChars).
					Str("trigger", p.cfg.Trigger).Str("summarizer", p.sum.Name()).Int("max_concurrent_folds", p.cfg.MaxConcurrentFolds).
					Msg("processor started")
				close(p.ready)
			}
		},
		rewound: func() {
			for _, sh := range p.shards {
				done := make(chan struct{})
				sh.ctrl <- done
				<-done
			}
		},
	})
	if err != nil {
		stopShards()
		return err
	}

	p.log.Info().Str("event", "processor_stopping").Msg("stopped fetching; finishing in-flight folds and flushing checkpoints")
	grace := time.AfterFunc(p.cfg.ShutdownGrace, func() {
		p.log.Warn().Str("event", "folds_abandoned").Dur("grace", p.cfg.ShutdownGrace).Msg("shutdown grace over; abandoning in-flight folds")
		cancelFolds()
		cancelDL()
	})
	stopShards()
	grace.Stop()
	p.folds.Wait()
	p.log.Info().Str("event", "processor_stopped").Uint64("applied", p.applied.Load()).Msg("processor stopped")
	return nil
}

// resumeDue hands every session marked due (a fold that was interrupted or
// failed, by this process or a dead one) to its shard, so its fold work
// resumes even if the session never sends another event. Listing them is
// retried with backoff (a cluster in failover may not answer at once):
// such a session may never send the event that would resume it.
func (p *Processor) resumeDue(ctx context.Context, stopping <-chan struct{}) {
	retryList := newAttachBackoff()
	var ids []string
	for attempt := 1; ; attempt++ {
		var err error
		if ids, err = p.store.ListDue(ctx); err == nil {
			break
		}
		wait := retryList.NextBackOff()
		if ctx.Err() == nil {
			p.log.Warn().Err(err).Str("event", "resume_list_failed").Int("attempt", attempt).Dur("retry_in", wait).
				Msg("could not list sessions with interrupted folds; retrying")
		}
		select {
		case <-stopping:
			return
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	if len(ids) > 0 {
		p.log.Info().Str("event", "folds_resuming").Int("sessions", len(ids)).Msg("resuming sessions with interrupted or failed folds")
	}
	for _, id := range ids {
		if p.cfg.Owns != nil && !p.cfg.Owns(id) {
			continue // another partition's: its owner resumes it
		}
		select {
		case p.shardOf(id).wakeCh <- id:
		case <-stopping:
			return
		}
	}
}

// ConsumerName is the durable consumer the engine attaches to: the
// configured one (Config.Consumer), or, after that name could not be read
// or re-created for a while, a fresh one (<consumer>-r<id>).
func (p *Processor) ConsumerName() string { return p.cons.name() }

// dispatch routes a message to its session's shard; parsing the subject
// here keeps every event of a session on one goroutine, in stream order.
func (p *Processor) dispatch(msg jetstream.Msg, seq uint64, received time.Time) {
	session, kind, perr := p.subj.ParseIn(msg.Subject())
	p.shardOf(session).in <- inMsg{msg: msg, seq: seq, received: received, session: session, kind: kind, perr: perr}
}

func (p *Processor) shardOf(session string) *shard {
	h := fnv.New32a()
	h.Write([]byte(session))
	return p.shards[h.Sum32()%uint32(len(p.shards))]
}
