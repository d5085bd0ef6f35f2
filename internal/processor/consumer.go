package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// consumerDescription marks the durable consumers an engine creates, so a
// consumer that only looks like one of ours by name is left alone.
const consumerDescription = "foldstream processor"

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

// ConsumerName is the durable consumer the engine attaches to: the
// configured one (Config.Consumer), or, after that name could not be read
// or re-created for a while, a fresh one (<consumer>-r<id>).
func (p *Processor) ConsumerName() string { return *p.consumer.Load() }

// isOwnConsumer reports whether name is the configured consumer or one of
// the fresh names an engine of that consumer moves to (attach).
func (p *Processor) isOwnConsumer(name string) bool { return ownConsumerName(p.cfg.Consumer, name) }

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
func (p *Processor) renameConsumer(cause error) {
	old, fresh := p.ConsumerName(), p.cfg.Consumer+"-r"+nuid.Next()
	p.consumer.Store(&fresh)
	p.log.Warn().Err(cause).Str("event", "consumer_renamed").Str("consumer", old).Str("new_consumer", fresh).Int("refused_attaches", stuckAttempts).
		Msg("the consumer keeps refusing to be read or re-created; attaching under a fresh name at the ack floor, the old one is deleted once it answers")
}

// ownConsumers lists the stream's consumers that are this engine's: the
// configured name and the fresh names it or an earlier engine moved to.
func (p *Processor) ownConsumers(ctx context.Context) ([]string, error) {
	var names []string
	lister := p.inStream.ConsumerNames(ctx)
	for name := range lister.Name() {
		if p.isOwnConsumer(name) {
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
func (p *Processor) dropConsumers(ctx context.Context, names []string, wg *sync.WaitGroup) {
	p.dropMu.Lock()
	if p.dropping == nil {
		p.dropping = make(map[string]bool)
	}
	mine := names[:0:0]
	for _, name := range names {
		if !p.dropping[name] {
			p.dropping[name] = true
			mine = append(mine, name)
		}
	}
	p.dropMu.Unlock()
	if len(mine) == 0 {
		return
	}
	names = slices.Clone(mine) // the loop below filters names in place
	wg.Go(func() {
		defer func() {
			p.dropMu.Lock()
			for _, name := range mine {
				delete(p.dropping, name)
			}
			p.dropMu.Unlock()
		}()
		retry := newAttachBackoff()
		for len(names) > 0 {
			if p.before != nil {
				if err := p.before(ctx); err != nil {
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
				if name == p.ConsumerName() {
					continue
				}
				err := p.js.DeleteConsumer(ctx, p.layout.In, name)
				switch {
				case err == nil:
					p.log.Info().Str("event", "consumer_dropped").Str("consumer", name).Msg("deleted a consumer this engine no longer reads from")
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
