package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// consumerDescription marks the durable consumers an engine creates, so a
// consumer that only looks like one of ours by name is left alone.
const consumerDescription = "foldstream processor"

// consumers is the engine's consumer manager: it attaches the durable
// consumer at the ack floor (retried while a cluster fails over), moves to
// a fresh name when the consumer's own name keeps refusing (rename),
// deletes the names it moved away from (dropConsumers), hands each
// delivery to the engine in order (consume), watches for a consumer that
// stopped delivering (stall.go), and rewinds: when a shard cannot keep a
// session consistent, or a delivery was lost, it stops the iterator, has
// every shard drop what is not checkpointed, and attaches again at the
// ack floor. It knows nothing of sessions: the engine passes it what to
// do with a delivery and on each attach and rewind (consumerHooks).
type consumers struct {
	js            jetstream.JetStream
	in            string // the inbound stream's name
	stream        jetstream.Stream
	filters       []string // the consumer's filter subjects
	base          string   // Config.Consumer
	ackWait       time.Duration
	maxAckPending int
	partitioned   bool                        // a partition engine (Config.Owns set)
	before        func(context.Context) error // Deps.BeforeAttach
	log           zerolog.Logger
	rewinds       prometheus.Counter
	hooks         consumerHooks

	// current is the durable consumer's name (name); run's goroutine
	// moves it (renameConsumer).
	current atomic.Pointer[string]
	// dropping holds the consumer names a dropConsumers goroutine is
	// deleting, so that re-attaches during a long outage do not start
	// another for the same name. Guarded by dropMu.
	dropMu   sync.Mutex
	dropping map[string]bool
	itMu     sync.Mutex
	it       jetstream.MessagesContext
	rewind   atomic.Bool // a shard asked to re-consume from the ack floor
	attached bool        // an attach succeeded once (run's goroutine only)
	floor    uint64      // the consumer's ack floor at the last attach (run's goroutine only)
	// handled is floor for the shards: every inbound event at or below it
	// was applied and checkpointed, or dead-lettered (loader.failed).
	handled atomic.Uint64
	// backlog is the consumer's pending count at the last delivery: while
	// more events wait on the stream, a shard's input only seems quiet
	// (the cores are busy elsewhere) and its checkpoints can wait
	// (shard.idle).
	backlog atomic.Uint64
}

// consumerHooks is what the consumer manager does with the engine.
type consumerHooks struct {
	// dispatch hands a delivery to its session's shard, in stream order.
	dispatch func(msg jetstream.Msg, seq uint64, received time.Time)
	// attached is called after each attach, on run's goroutine; first
	// is true for the first one.
	attached func(ctx context.Context, floor uint64, first bool)
	// rewound has every shard drop what is not checkpointed, and returns
	// once they did.
	rewound func()
}

// newConsumers is the consumer manager of an engine run with cfg, on
// layout's inbound stream.
func newConsumers(cfg Config, js jetstream.JetStream, layout broker.Layout, before func(context.Context) error, log zerolog.Logger, rewinds prometheus.Counter) *consumers {
	filters := cfg.FilterSubjects
	if len(filters) == 0 {
		filters = layout.Subjects.InFilters()
	}
	cm := &consumers{js: js, in: layout.In, filters: filters, base: cfg.Consumer, ackWait: cfg.AckWait, maxAckPending: cfg.MaxAckPending,
		partitioned: cfg.Owns != nil, before: before, log: log, rewinds: rewinds}
	cm.current.Store(&cfg.Consumer)
	return cm
}

// run attaches and consumes until ctx ends, rewinding when asked
// (requestRewind). A failed attach (a cluster electing its meta leader
// answers 503, "JetStream system temporarily unavailable") is retried with
// backoff until it succeeds or ctx ends; only a first attach that fails
// for a reason time cannot fix (a bad filter, a partition no longer ours)
// ends run, with that error. Deletes of consumers the engine moved away
// from run beside it and end with it: a partition engine's must not
// outlive its ownership.
func (cm *consumers) run(ctx context.Context, stream jetstream.Stream, hooks consumerHooks) error {
	cm.stream, cm.hooks = stream, hooks
	retryAttach := newAttachBackoff()
	refused := 0 // attaches in a row answered 503 by the server we are connected to
	stuck := 0   // attaches in a row that failed on the consumer's own name
	var dropping sync.WaitGroup
	defer dropping.Wait()
	for attempt := 1; ; attempt++ {
		it, cons, floor, err := cm.attach(ctx, &dropping)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !cm.attached && !transientJS(err) {
				return err
			}
			wait := retryAttach.NextBackOff()
			cm.log.Error().Err(err).Str("event", "attach_failed").Int("attempt", attempt).Dur("retry_in", wait).
				Msg("attaching the consumer failed; retrying")
			if refused = refusedBy(err, refused); refused == leaderlessAttempts {
				cm.reconnect()
				refused = 0
			}
			if stuck = stuckOn(err, stuck); stuck == stuckAttempts {
				cm.renameConsumer(err)
				stuck = 0
			}
			if !sleepCtx(ctx, wait) {
				return nil
			}
			continue
		}
		attempt, refused, stuck = 0, 0, 0
		retryAttach.Reset()
		cm.handled.Store(floor)
		first := !cm.attached
		cm.attached = true
		cm.hooks.attached(ctx, floor, first)
		cm.consume(ctx, it, cons)
		if ctx.Err() != nil {
			return nil
		}
		// A shard could not keep a session consistent (state load,
		// checkpoint or dead-letter write failed), or the consumer stopped
		// delivering: forget what is not checkpointed and consume again,
		// in order, from the ack floor.
		cm.rewinds.Inc()
		cm.hooks.rewound()
		cm.rewind.Store(false)
		cm.log.Warn().Str("event", "consumer_rewound").Msg("dropped unacknowledged in-memory state; re-consuming from the ack floor")
		// A failing KV or stream gets a moment before the re-attach.
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return nil
		}
	}
}

// rewinding reports whether a rewind was asked for and is not over: the
// shards apply nothing more (what they would apply comes again after it).
// Safe from any goroutine.
func (cm *consumers) rewinding() bool { return cm.rewind.Load() }

// handledFloor is the ack floor of the last attach: every inbound event
// at or below it was applied and checkpointed, or dead-lettered. Safe
// from any goroutine.
func (cm *consumers) handledFloor() uint64 { return cm.handled.Load() }

// backlogged reports whether more events waited on the consumer at the
// last delivery. Safe from any goroutine.
func (cm *consumers) backlogged() bool { return cm.backlog.Load() > 0 }

// stuckAttempts is how many attaches may fail on the consumer itself
// (reading, deleting or creating that one name, with an error time may
// fix) before the engine attaches under a fresh name. Seen on a
// 3-node cluster after a node went away: every request on the processor's
// consumer was refused with a 503 for 30 s and more while creates of other
// consumers on the same stream succeeded. A consumer whose raft group has
// no leader answers its info with that 503, so the attach could neither
// read its ack floor nor replace it.
const stuckAttempts = leaderlessAttempts

// consumerStuck is an attach error on the engine's own consumer name.
type consumerStuck struct {
	name string
	err  error
}

func (e *consumerStuck) Error() string { return fmt.Sprintf("consumer %s: %v", e.name, e.err) }
func (e *consumerStuck) Unwrap() error { return e.err }

// stuckOn counts failed attaches on the consumer's own name with an error
// that may pass, since the last attach that succeeded. Other failures in
// between (the partition guard, listing the stream's consumers) leave the
// count as it is: they say nothing about the name.
func stuckOn(err error, before int) int {
	var stuck *consumerStuck
	switch {
	case !errors.As(err, &stuck):
		return before
	case transientJS(stuck.err):
		return before + 1
	}
	return 0
}

// name is the durable consumer the engine attaches to: the configured
// one (Config.Consumer), or, after that name could not be read or
// re-created for a while, a fresh one (<consumer>-r<id>). Safe from any
// goroutine.
func (cm *consumers) name() string { return *cm.current.Load() }

// isOwnConsumer reports whether name is the configured consumer or one of
// the fresh names an engine of that consumer moves to (attach).
func (cm *consumers) isOwnConsumer(name string) bool { return ownConsumerName(cm.base, name) }

// ownConsumerName reports whether name is base or base-r<nuid>.
func ownConsumerName(base, name string) bool {
	if name == base {
		return true
	}
	id, ok := strings.CutPrefix(name, base+"-r")
	if !ok || len(id) != len(nuid.Next()) {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// renameConsumer makes the next attach create a fresh consumer, leaving
// the one that keeps refusing to the attach's clean-up. Nothing is lost:
// the new one starts after the highest ack floor the engine could read
// (the floor of its last attach at least), and every event above it is
// delivered again, in order.
func (cm *consumers) renameConsumer(cause error) {
	old, fresh := cm.name(), cm.base+"-r"+nuid.Next()
	cm.current.Store(&fresh)
	cm.log.Warn().Err(cause).Str("event", "consumer_renamed").Str("consumer", old).Str("new_consumer", fresh).Int("refused_attaches", stuckAttempts).
		Msg("the consumer keeps refusing to be read or re-created; attaching under a fresh name at the ack floor, the old one is deleted once it answers")
}

// ownConsumers lists the stream's consumers that are this engine's: the
// configured name and the fresh names it or an earlier engine moved to.
func (cm *consumers) ownConsumers(ctx context.Context) ([]string, error) {
	var names []string
	lister := cm.stream.ConsumerNames(ctx)
	for name := range lister.Name() {
		if cm.isOwnConsumer(name) {
			names = append(names, name)
		}
	}
	return names, lister.Err()
}

// dropConsumers deletes consumers the engine no longer reads from, retried
// with backoff until each is gone or ctx ends. They hold nothing back (the
// inbound stream keeps its history by limits), and no pull of this engine
// waits on them, so this is tidying, never needed for correctness. Each
// delete is guarded as an attach is: a partition engine that lost its
// partition deletes nothing.
func (cm *consumers) dropConsumers(ctx context.Context, names []string, wg *sync.WaitGroup) {
	cm.dropMu.Lock()
	if cm.dropping == nil {
		cm.dropping = make(map[string]bool)
	}
	mine := names[:0:0]
	for _, name := range names {
		if !cm.dropping[name] {
			cm.dropping[name] = true
			mine = append(mine, name)
		}
	}
	cm.dropMu.Unlock()
	if len(mine) == 0 {
		return
	}
	names = slices.Clone(mine) // the loop below filters names in place
	wg.Go(func() {
		defer func() {
			cm.dropMu.Lock()
			for _, name := range mine {
				delete(cm.dropping, name)
			}
			cm.dropMu.Unlock()
		}()
		retry := newAttachBackoff()
		for len(names) > 0 {
			if cm.before != nil {
				if err := cm.before(ctx); err != nil {
					if ctx.Err() != nil || !transientJS(err) {
						return
					}
					if !sleepCtx(ctx, retry.NextBackOff()) {
						return
					}
					continue
				}
			}
			left := names[:0]
			for _, name := range names {
				if name == cm.name() {
					continue
				}
				err := cm.js.DeleteConsumer(ctx, cm.in, name)
				switch {
				case err == nil:
					cm.log.Info().Str("event", "consumer_dropped").Str("consumer", name).Msg("deleted a consumer this engine no longer reads from")
				case errors.Is(err, jetstream.ErrConsumerNotFound):
				default:
					left = append(left, name)
				}
			}
			names = left
			if len(names) > 0 && !sleepCtx(ctx, retry.NextBackOff()) {
				return
			}
		}
	})
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
func (cm *consumers) reconnect() {
	cm.log.Warn().Str("event", "nats_reconnect_forced").Int("refused_attaches", leaderlessAttempts).
		Msg("the server we are connected to keeps refusing JetStream requests (no meta leader); reconnecting to another server")
	if err := cm.js.Conn().ForceReconnect(); err != nil {
		cm.log.Warn().Err(err).Str("event", "nats_reconnect_failed").Msg("could not force a reconnect")
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
func (cm *consumers) attach(ctx context.Context, drop *sync.WaitGroup) (jetstream.MessagesContext, jetstream.Consumer, uint64, error) {
	name := cm.name()
	if cm.before != nil {
		if err := cm.before(ctx); err != nil {
			return nil, nil, 0, fmt.Errorf("consumer %s: %w", name, err)
		}
	}
	ours, err := cm.ownConsumers(ctx)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("consumers of %s: %w", cm.in, err)
	}
	// The floor seen at the last attach: if that attach deleted the
	// consumer and then failed to create it again (a cluster's meta group
	// unavailable), the consumer is gone and with it its floor, and
	// starting from the stream's first event would re-read everything.
	// Starting lower than the true floor is always safe (a redelivery is a
	// no-op), so the remembered one will do.
	floor := cm.floor
	var stale []string
	for _, n := range ours {
		old, err := cm.js.Consumer(ctx, cm.in, n)
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
		if n != cm.base && info.Config.Description != consumerDescription {
			continue // named like ours, made by someone else
		}
		if err := cm.refuseSharedConsumer(ctx, old, info); err != nil {
			return nil, nil, 0, err
		}
		floor = max(floor, info.AckFloor.Stream)
		if n != name {
			stale = append(stale, n)
		}
	}
	cm.floor = floor
	if slices.Contains(ours, name) {
		if err := cm.js.DeleteConsumer(ctx, cm.in, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, nil, 0, &consumerStuck{name: name, err: fmt.Errorf("reset: %w", err)}
		}
	}
	var left []string
	for _, n := range stale {
		if err := cm.js.DeleteConsumer(ctx, cm.in, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			left = append(left, n)
		}
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   consumerDescription,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cm.ackWait,
		MaxAckPending: cm.maxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    -1,
	}
	if len(cm.filters) == 1 {
		cfg.FilterSubject = cm.filters[0]
	} else {
		cfg.FilterSubjects = cm.filters
	}
	if floor > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = floor + 1
	}
	cons, err := cm.js.CreateOrUpdateConsumer(ctx, cm.in, cfg)
	if err != nil {
		return nil, nil, 0, &consumerStuck{name: name, err: fmt.Errorf("on %s: %w", cm.in, err)}
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(fetchMaxMessages, fetchMaxBytes(cm.js.Conn().MaxPayload())))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("consume %s: %w", cm.in, err)
	}
	if len(left) > 0 {
		cm.dropConsumers(ctx, left, drop)
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
func (cm *consumers) refuseSharedConsumer(ctx context.Context, cons jetstream.Consumer, info *jetstream.ConsumerInfo) error {
	if cm.partitioned {
		return nil // a partition engine: internal/partition hands it over
	}
	if cm.attached {
		return nil // a re-attach: the waiting requests may be this process's own
	}
	name := info.Name
	for i := 0; info.NumWaiting > 0; i++ {
		if i == 5 {
			return fmt.Errorf("another processor is consuming stream %s with durable consumer %s (%d pull requests waiting): "+
				"one processor without --partitions must be the only one on its stream. Stop the other one, or run every instance with "+
				"--partitions N (the same N everywhere, docs/deployment.md), or give this one its own streams with another --prefix. "+
				"(If the other one died without closing its connection, the server drops it within its ping timeout, 2 minutes by default.)",
				cm.in, name, info.NumWaiting)
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
func (cm *consumers) consume(ctx context.Context, it jetstream.MessagesContext, cons jetstream.Consumer) {
	cm.itMu.Lock()
	cm.it = it
	cm.itMu.Unlock()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer func() {
		cm.itMu.Lock()
		cm.it = nil
		cm.itMu.Unlock()
		it.Stop()
	}()
	if cm.rewind.Load() {
		// Asked between the attach and here, with no iterator to stop
		// (requestRewind): this one would wait on the consumer the rewind
		// was asked for, and a later request would find one pending.
		return
	}
	var delivered uint64 // consumer sequence of the last delivery seen
	var prog progress    // the same, for the stall watch
	quit := make(chan struct{})
	defer close(quit)
	go cm.watchStalls(ctx, cons, &prog, quit)
	for {
		prog.waiting.Store(true)
		msg, err := it.Next()
		prog.waiting.Store(false)
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil || cm.rewind.Load() {
				return
			}
			cm.log.Warn().Err(err).Str("event", "consume_error").Msg("fetching inbound events; retrying")
			continue
		}
		if cm.rewind.Load() {
			return // not dispatched: it is redelivered after the rewind
		}
		meta, err := parseDelivery(msg.Reply())
		if err != nil {
			cm.log.Error().Err(err).Str("event", "bad_metadata").Str("subject", msg.Subject()).Msg("message without JetStream metadata; terminated")
			_ = msg.Term()
			continue
		}
		// The consumer is this process's alone and new since attach, so its
		// deliveries are numbered 1, 2, 3, ... A gap is a delivery lost in
		// flight (a consumer leader or route went away): JetStream would
		// bring it back only after AckWait, behind later events of its
		// session. Rewind now instead, and everything comes again in order.
		if meta.consumer != delivered+1 {
			cm.requestRewind("delivery_lost", fmt.Errorf("consumer delivery %d followed %d: %d deliveries did not arrive",
				meta.consumer, delivered, meta.consumer-delivered-1))
			return
		}
		delivered = meta.consumer
		prog.seen.Store(delivered)
		cm.backlog.Store(meta.pending)
		cm.hooks.dispatch(msg, meta.stream, meta.stored)
	}
}

// requestRewind is called by a shard that cannot keep a session
// consistent, and by the consume loop and the stall watch when deliveries
// were lost or stopped: the iterator stops, and run rewinds. Safe from any
// goroutine; a request while one is pending is a no-op.
func (cm *consumers) requestRewind(reason string, err error) {
	if cm.rewind.Swap(true) {
		return
	}
	cm.log.Error().Err(err).Str("event", "rewind_requested").Str("reason", reason).Msg("state could not be kept consistent; rewinding the consumer")
	cm.itMu.Lock()
	if cm.it != nil {
		cm.it.Stop()
	}
	cm.itMu.Unlock()
}
