package processor

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/nats-io/nats.go"
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
	m     *metrics
	slots chan struct{}
	mem   *memRelease
}

// NewShared registers the metrics on reg and bounds folds across engines.
func NewShared(reg prometheus.Registerer, maxConcurrentFolds int) *Shared {
	if maxConcurrentFolds <= 0 {
		maxConcurrentFolds = Config{}.withDefaults().MaxConcurrentFolds
	}
	return &Shared{m: newMetrics(reg), slots: make(chan struct{}, maxConcurrentFolds), mem: new(memRelease)}
}

// Processor consumes inbound events and folds sessions.
type Processor struct {
	cfg    Config
	js     jetstream.JetStream
	layout broker.Layout
	subj   events.Subjects
	store  *state.Store
	foldJS jetstream.JetStream // the fold path's publishes (Deps.FoldJS)
	sum    fold.Summarizer
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
	slots    chan struct{} // fold concurrency limit
	mem      *memRelease   // returns memory freed by idle compaction (idle.go)

	rewind atomic.Bool // a shard asked to re-consume from the ack floor
	// consumer is the durable consumer's name (ConsumerName); Run's
	// goroutine moves it (renameConsumer).
	consumer atomic.Pointer[string]
	// dropping holds the consumer names a dropConsumers goroutine is
	// deleting, so that re-attaches during a long outage do not start
	// another for the same name. Guarded by dropMu.
	dropMu   sync.Mutex
	dropping map[string]bool
	itMu     sync.Mutex
	it       jetstream.MessagesContext
	before   func(context.Context) error
	// abortFolds cancels in-flight folds at once (Abort), set by Run.
	abortMu    sync.Mutex
	abortFolds context.CancelFunc
	aborted    bool
	floor      uint64 // the consumer's ack floor at the last attach (Run's goroutine only)
	// handled is floor for the shards: every inbound event at or below it
	// was applied and checkpointed, or dead-lettered (load.go's rebuild).
	handled atomic.Uint64
	applied atomic.Uint64 // events applied, for tests and the bench
	landed  atomic.Uint64 // folds completed
	// backlog is the consumer's pending count at the last delivery: while
	// more events wait on the stream, a shard's input only seems quiet
	// (the cores are busy elsewhere) and its checkpoints can wait
	// (shard.idle).
	backlog atomic.Uint64
	ready   chan struct{}

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
		cfg: cfg, js: d.JS, layout: d.Layout, subj: d.Layout.Subjects, store: d.Store,
		foldJS: d.FoldJS,
		sum:    d.Summarizer, tokens: d.Tokens, log: d.Log, clock: d.Clock,
		ready:  make(chan struct{}),
		before: d.BeforeAttach,
	}
	p.consumer.Store(&cfg.Consumer)
	p.sessionPolicy = p.resolve(p.policy)
	if p.sessionPolicy.Mode != p.policy.Mode {
		d.Log.Warn().Str("event", "evict_fallback").Str("configured_mode", string(p.policy.Mode)).Str("mode", string(p.sessionPolicy.Mode)).
			Msg("the configured mode needs recall (the context service, --service) to find the turns it drops; without it that is amnesia, so sessions fold in the mode it falls back to")
	}
	if d.Shared != nil {
		p.m, p.slots, p.mem = d.Shared.m, d.Shared.slots, d.Shared.mem
	} else {
		p.m, p.slots, p.mem = newMetrics(d.Registry), make(chan struct{}, cfg.MaxConcurrentFolds), new(memRelease)
	}
	p.breaker = d.Breaker
	if p.breaker == nil {
		p.breaker = retry.NewBreaker(retry.BreakerConfig{
			Endpoint: d.Summarizer.Name(), OpenFor: cfg.BreakerOpenFor, MaxOpenFor: cfg.BreakerMaxOpenFor,
		}, d.Log)
	}
	p.m.breaker.Store(p.breaker)
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
// them: lease cleared, nothing moved), flush checkpoints, ack, return.
func (p *Processor) Run(ctx context.Context) error {
	var err error
	if p.inStream, err = p.js.Stream(ctx, p.layout.In); err != nil {
		return fmt.Errorf("inbound stream %s: %w", p.layout.In, err)
	}
	if p.outStrm, err = p.js.Stream(ctx, p.layout.Out); err != nil {
		return fmt.Errorf("outbound stream %s: %w", p.layout.Out, err)
	}

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

	// A failed attach (a cluster electing its meta leader answers 503,
	// "JetStream system temporarily unavailable") is retried with backoff
	// until it succeeds or ctx ends; only a first attach that fails for a
	// reason time cannot fix (a bad filter, a partition no longer ours)
	// ends Run.
	retryAttach := newAttachBackoff()
	started := false
	refused := 0 // attaches in a row answered 503 by the server we are connected to
	stuck := 0   // attaches in a row that failed on the consumer's own name
	// Deletes of consumers the engine moved away from (attach) run beside
	// it and end with it: a partition engine's must not outlive its
	// ownership.
	var dropping sync.WaitGroup
	defer dropping.Wait()
	for attempt := 1; ; attempt++ {
		it, cons, floor, err := p.attach(ctx, &dropping)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if !started && !transientJS(err) {
				stopShards()
				return err
			}
			wait := retryAttach.NextBackOff()
			p.log.Error().Err(err).Str("event", "attach_failed").Int("attempt", attempt).Dur("retry_in", wait).
				Msg("attaching the consumer failed; retrying")
			if refused = refusedBy(err, refused); refused == leaderlessAttempts {
				p.reconnect()
				refused = 0
			}
			if stuck = stuckOn(err, stuck); stuck == stuckAttempts {
				p.renameConsumer(err)
				stuck = 0
			}
			if !sleepCtx(ctx, wait) {
				break
			}
			continue
		}
		attempt, refused, stuck = 0, 0, 0
		retryAttach.Reset()
		p.handled.Store(floor)
		// After a rewind too: a session whose events are all checkpointed
		// gets no event that would re-check it, yet may have folds to do.
		go p.resumeDue(ctx, stopping)
		if !started {
			started = true
			p.log.Info().Str("event", "processor_started").Str("instance", p.cfg.InstanceID).Str("consumer", p.ConsumerName()).
				Uint64("resume_after_seq", floor).Int("shards", p.cfg.Shards).Int("recent_window", p.cfg.Window.Recent).
				Int("batch_size", p.cfg.Window.Batch).Int("max_summary_chars", p.cfg.Window.MaxSummaryChars).
				Str("trigger", p.cfg.Trigger).Str("summarizer", p.sum.Name()).Int("max_concurrent_folds", p.cfg.MaxConcurrentFolds).
				Msg("processor started")
			close(p.ready)
		}
		p.consume(ctx, it, cons)
		if ctx.Err() != nil {
			break
		}
		// A shard could not keep a session consistent (state load,
		// checkpoint or dead-letter write failed), or the consumer stopped
		// delivering: forget what is not checkpointed and consume again,
		// in order, from the ack floor.
		p.m.rewinds.Inc()
		for _, sh := range p.shards {
			done := make(chan struct{})
			sh.ctrl <- done
			<-done
		}
		p.rewind.Store(false)
		p.log.Warn().Str("event", "consumer_rewound").Msg("dropped unacknowledged in-memory state; re-consuming from the ack floor")
		// A failing KV or stream gets a moment before the re-attach.
		if !sleepCtx(ctx, 200*time.Millisecond) {
			break
		}
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

// leaderlessAttempts is how many attaches in a row the server we are
// connected to may refuse with a 503 before the connection moves to
// another server of the cluster.
const leaderlessAttempts = 5

// refusedBy counts attaches in a row refused with a 503 ("JetStream system
// temporarily unavailable"): the server that answers has no meta leader.
func refusedBy(err error, before int) int {
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) {
		if api := jsErr.APIError(); api != nil && api.Code == 503 {
			return before + 1
		}
	}
	return 0
}

// reconnect moves the connection to another server. Seen on a 3-node
// cluster after one node went away: the node this process is connected to
// answered every consumer create with "JetStream system temporarily
// unavailable" (it saw no meta leader) for as long as the test waited,
// while the cluster had one; the consumer's create then never succeeds
// from here. Nothing is in flight on the ingest side while the attach
// fails, so a reconnect costs nothing but the round trip.
func (p *Processor) reconnect() {
	p.log.Warn().Str("event", "nats_reconnect_forced").Int("refused_attaches", leaderlessAttempts).
		Msg("the server we are connected to keeps refusing JetStream requests (no meta leader); reconnecting to another server")
	if err := p.js.Conn().ForceReconnect(); err != nil {
		p.log.Warn().Err(err).Str("event", "nats_reconnect_failed").Msg("could not force a reconnect")
	}
}

// newAttachBackoff paces retries of the consumer's attach and of other
// calls a cluster in failover refuses for a while: from 200 ms up to 5 s,
// jittered, with no limit on the total (the caller's ctx is the limit).
func newAttachBackoff() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     200 * time.Millisecond,
		RandomizationFactor: 0.3,
		Multiplier:          2,
		MaxInterval:         5 * time.Second,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	return b
}

// sleepCtx waits d, or less if ctx ends first; false if it did.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// transientJS reports whether a JetStream call's error may go away on its
// own: a 5xx or 408 from the API (503 "JetStream system temporarily
// unavailable" while a meta leader is elected), no responders, a timeout,
// a connection between servers.
func transientJS(err error) bool {
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) {
		if api := jsErr.APIError(); api != nil && (api.Code >= 500 || api.Code == 408) {
			return true
		}
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrNoServers)
}

// attach (re)creates the durable consumer so that it delivers everything
// after the ack floor in stream order. A plain restart of the old consumer
// would hand out new messages at once but redeliver unacknowledged ones
// only after AckWait, out of order: a later event of a session could then
// raise its applied sequence and make the earlier ones look already
// applied. Everything at or below the floor is covered by checkpoints;
// anything above it that was acked is skipped by sequence on reload.
//
// The floor is the highest ack floor of the engine's consumers (its name
// and the fresh names it may have moved to, renameConsumer), each of which
// acks only what checkpoints cover. Those other than the one created are
// deleted: none may deliver to anyone after this attach. One that cannot
// be deleted now is deleted later (dropConsumers); stuck, it delivers
// nothing.
func (p *Processor) attach(ctx context.Context, drop *sync.WaitGroup) (jetstream.MessagesContext, jetstream.Consumer, uint64, error) {
	name := p.ConsumerName()
	if p.before != nil {
		if err := p.before(ctx); err != nil {
			return nil, nil, 0, fmt.Errorf("consumer %s: %w", name, err)
		}
	}
	ours, err := p.ownConsumers(ctx)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("consumers of %s: %w", p.layout.In, err)
	}
	// The floor seen at the last attach: if that attach deleted the
	// consumer and then failed to create it again (a cluster's meta group
	// unavailable), the consumer is gone and with it its floor, and
	// starting from the stream's first event would re-read everything.
	// Starting lower than the true floor is always safe (a redelivery is a
	// no-op), so the remembered one will do.
	floor := p.floor
	var stale []string
	for _, n := range ours {
		old, err := p.js.Consumer(ctx, p.layout.In, n)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			continue
		case err != nil && n == name:
			return nil, nil, 0, &consumerStuck{name: n, err: err}
		case err != nil:
			// Its floor unknown, which a lower floor covers; no pull of
			// this engine waits on it.
			stale = append(stale, n)
			continue
		}
		info := old.CachedInfo()
		if n != p.cfg.Consumer && info.Config.Description != consumerDescription {
			continue // named like ours, made by someone else
		}
		if err := p.refuseSharedConsumer(ctx, old, info); err != nil {
			return nil, nil, 0, err
		}
		floor = max(floor, info.AckFloor.Stream)
		if n != name {
			stale = append(stale, n)
		}
	}
	p.floor = floor
	if slices.Contains(ours, name) {
		if err := p.js.DeleteConsumer(ctx, p.layout.In, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, nil, 0, &consumerStuck{name: name, err: fmt.Errorf("reset: %w", err)}
		}
	}
	var left []string
	for _, n := range stale {
		if err := p.js.DeleteConsumer(ctx, p.layout.In, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			left = append(left, n)
		}
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   consumerDescription,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       p.cfg.AckWait,
		MaxAckPending: p.cfg.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    -1,
	}
	switch filters := p.cfg.FilterSubjects; len(filters) {
	case 0:
		cfg.FilterSubjects = p.subj.InFilters()
	case 1:
		cfg.FilterSubject = filters[0]
	default:
		cfg.FilterSubjects = filters
	}
	if len(cfg.FilterSubjects) == 1 {
		cfg.FilterSubject, cfg.FilterSubjects = cfg.FilterSubjects[0], nil
	}
	if floor > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = floor + 1
	}
	cons, err := p.js.CreateOrUpdateConsumer(ctx, p.layout.In, cfg)
	if err != nil {
		return nil, nil, 0, &consumerStuck{name: name, err: fmt.Errorf("on %s: %w", p.layout.In, err)}
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(fetchMaxMessages, fetchMaxBytes(p.js.Conn().MaxPayload())))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("consume %s: %w", p.layout.In, err)
	}
	if len(left) > 0 {
		p.dropConsumers(ctx, left, drop)
	}
	return it, cons, floor, nil
}

// A pull asks for at most fetchMaxMessages events and fetchMaxBytes of
// them: a backlog of large events (a bot sending 1 MiB turns) must not
// buffer 2048 MiB in the client.
const fetchMaxMessages = 2048

// fetchMaxBytes is at least 4 of the largest messages the server takes:
// a message larger than a pull's byte limit is never delivered (the
// server answers that pull with an error instead), so the limit must
// never be below the server's max_payload.
func fetchMaxBytes(maxPayload int64) int {
	return int(max(16<<20, 4*maxPayload))
}

// refuseSharedConsumer fails the first attach of a processor without
// partitions when another process is consuming its durable consumer: the
// attach deletes and recreates the consumer, so two such processors would
// take it from each other forever (each logging consume_error "consumer
// deleted" and consumer_rewound). The sign is the other one's pull
// requests waiting on the consumer; the server drops those of a closed
// connection, so it is sampled a few times to let a crashed predecessor's
// connection go before refusing.
func (p *Processor) refuseSharedConsumer(ctx context.Context, cons jetstream.Consumer, info *jetstream.ConsumerInfo) error {
	if p.cfg.Owns != nil {
		return nil // a partition engine: internal/partition hands it over
	}
	select {
	case <-p.ready:
		return nil // a re-attach: the waiting requests may be this process's own
	default:
	}
	name := info.Name
	for i := 0; info.NumWaiting > 0; i++ {
		if i == 5 {
			return fmt.Errorf("another processor is consuming stream %s with durable consumer %s (%d pull requests waiting): "+
				"one processor without --partitions must be the only one on its stream. Stop the other one, or run every instance with "+
				"--partitions N (the same N everywhere, docs/deployment.md), or give this one its own streams with another --prefix. "+
				"(If the other one died without closing its connection, the server drops it within its ping timeout, 2 minutes by default.)",
				p.layout.In, name, info.NumWaiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		var err error
		if info, err = cons.Info(ctx); err != nil {
			return fmt.Errorf("consumer %s: %w", name, err)
		}
	}
	return nil
}

// consume dispatches messages until ctx ends or a shard asks for a rewind.
func (p *Processor) consume(ctx context.Context, it jetstream.MessagesContext, cons jetstream.Consumer) {
	p.itMu.Lock()
	p.it = it
	p.itMu.Unlock()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer func() {
		p.itMu.Lock()
		p.it = nil
		p.itMu.Unlock()
		it.Stop()
	}()
	var delivered uint64 // consumer sequence of the last delivery seen
	var prog progress    // the same, for the stall watch
	quit := make(chan struct{})
	defer close(quit)
	go p.watchStalls(ctx, cons, &prog, quit)
	for {
		prog.waiting.Store(true)
		msg, err := it.Next()
		prog.waiting.Store(false)
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil || p.rewind.Load() {
				return
			}
			p.log.Warn().Err(err).Str("event", "consume_error").Msg("fetching inbound events; retrying")
			continue
		}
		if p.rewind.Load() {
			return // not dispatched: it is redelivered after the rewind
		}
		meta, err := parseDelivery(msg.Reply())
		if err != nil {
			p.log.Error().Err(err).Str("event", "bad_metadata").Str("subject", msg.Subject()).Msg("message without JetStream metadata; terminated")
			_ = msg.Term()
			continue
		}
		// The consumer is this process's alone and new since attach, so its
		// deliveries are numbered 1, 2, 3, ... A gap is a delivery lost in
		// flight (a consumer leader or route went away): JetStream would
		// bring it back only after AckWait, behind later events of its
		// session. Rewind now instead, and everything comes again in order.
		if meta.consumer != delivered+1 {
			p.requestRewind("delivery_lost", fmt.Errorf("consumer delivery %d followed %d: %d deliveries did not arrive",
				meta.consumer, delivered, meta.consumer-delivered-1))
			return
		}
		delivered = meta.consumer
		prog.seen.Store(delivered)
		p.backlog.Store(meta.pending)
		p.dispatch(msg, meta.stream, meta.stored)
	}
}

// requestRewind is called by a shard that cannot keep a session consistent.
func (p *Processor) requestRewind(reason string, err error) {
	if p.rewind.Swap(true) {
		return
	}
	p.log.Error().Err(err).Str("event", "rewind_requested").Str("reason", reason).Msg("state could not be kept consistent; rewinding the consumer")
	p.itMu.Lock()
	if p.it != nil {
		p.it.Stop()
	}
	p.itMu.Unlock()
}

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
