package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// seedSessions is how many sessions' replays SeedIndexes builds in one
// pass over the inbound stream: about 750 MiB of replays at 5,000 turns
// each, twice that with seedWorkers groups at once.
const seedSessions = 256

// seedIdle bounds the wait for the next message of a seeding pass (a
// request's scan waits recallIdle).
const seedIdle = time.Minute

// seedWorkers is how many groups SeedIndexes builds at once.
const seedWorkers = 2

// seedTries is how many times SeedIndexes reads the stream for a group
// before it gives up.
const seedTries = 3

// SeedIndexes builds the recall index of each of sessions from the
// inbound stream and writes it to the index store (<BASE>_RECALL, or
// <BASE>_RECALL_MEM with IndexStoreInMemory) as a
// request that built it would, so that the first request for each loads
// it instead of building it. It reads the whole stream once per
// seedSessions sessions: in a stream where many sessions interleave, one
// session's scan reads the stream's blocks for its own events, so
// building thousands one request at a time reads the whole stream
// thousands of times.
//
// A session whose stored index is usable (the checks of a load) is left
// as it is, and so is one whose events hold a reset (its first request
// builds it). opts are the service's (Admission, IndexStoreBytes,
// IndexStoreInMemory); it
// returns how many indexes it wrote.
func SeedIndexes(ctx context.Context, js jetstream.JetStream, layout broker.Layout, store *state.Store, sessions []string, log zerolog.Logger, opts ...Option) (int, error) {
	s, err := newServer(ctx, js, layout, store, nil, log, append(slices.Clone(opts), IndexBytes(0))...)
	if err != nil {
		return 0, err
	}
	if s.storeBytes == 0 {
		return 0, errors.New("service: seeding recall indexes: the index store is off (IndexStoreBytes 0)")
	}
	s.istore = newIndexStore(js, recallBucket(layout, s.storeKind), s.storeBytes, s.storeKind, log, nil)
	if s.storeChunked {
		s.istore.forceInline = 0
	}
	s.scanIdle = seedIdle
	var todo []string
	for _, id := range sessions {
		e := &cacheEntry{session: id}
		e.mu.Lock()
		rp, err := s.restored(ctx, e)
		e.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if rp == nil {
			todo = append(todo, id)
		}
	}
	info, err := s.in.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("service: seeding recall indexes: stream %s info: %w", layout.In, err)
	}
	// Two groups at a time, each with its own analyzer (its stem cache
	// is locked while a text is analyzed).
	groups := slices.Collect(slices.Chunk(todo, seedSessions))
	var (
		mu   sync.Mutex
		next int
		errs = make([]error, seedWorkers)
		wg   sync.WaitGroup
	)
	written := 0
	for w := range seedWorkers {
		an := newAnalyzer()
		wg.Go(func() {
			for {
				mu.Lock()
				if next == len(groups) || errors.Join(errs...) != nil {
					mu.Unlock()
					return
				}
				group := groups[next]
				next++
				mu.Unlock()
				n, err := s.seedGroup(ctx, an, info, group)
				for try := 1; err != nil && try < seedTries && ctx.Err() == nil; try++ {
					// A pass over a long stream on a busy server can lose
					// its consumer (missed heartbeats): the group again.
					s.log.Warn().Str("event", "recall_index_seed_retry").Int("sessions", len(group)).Int("try", try+1).Err(err).
						Msg("seeding a group of recall indexes failed; reading the stream for it again")
					n, err = s.seedGroup(ctx, an, info, group)
				}
				mu.Lock()
				written += n
				errs[w] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return written, err
	}
	return written, nil
}

// seedGroup builds and stores the indexes of one group of sessions in
// one pass over the stream up to info's last sequence, with an.
func (s *server) seedGroup(ctx context.Context, an *analyzer, info *jetstream.StreamInfo, group []string) (int, error) {
	rps := make(map[string]*replay, len(group))
	for _, id := range group {
		rps[id] = newReplay(an, s.adm, id, 1)
	}
	if info.State.LastSeq > 0 {
		// The whole stream, the other sessions' events skipped here: a
		// consumer filtered on hundreds of sessions' subjects costs the
		// server a search of its subject index for every message
		// delivered (minutes of CPU per million where sessions
		// interleave), a stream read in order a fraction of that.
		err := s.scanInbound(ctx, nil, 1, info.State.LastSeq, func(session string, seq uint64, at time.Time, kind string, data []byte) bool {
			if rp := rps[session]; rp != nil {
				rp.apply(seq, at, kind, data)
			}
			return true
		})
		if err != nil {
			return 0, err
		}
	}
	written := 0
	for _, id := range group {
		rp := rps[id]
		delete(rps, id) // its memory goes once written
		if rp.lastReset > 0 {
			continue // built as a request builds it: from the reset
		}
		rp.next = max(rp.next, info.State.LastSeq+1)
		rp.firstSeq = info.State.FirstSeq
		s.memoriesOf(ctx, rp, nil)
		e := &cacheEntry{session: id, r: rp, key: s.indexKey(id, info.Created), storedRead: -1, storedChunks: -1}
		s.persist(ctx, e, false)
		if e.storedRead >= 0 {
			written++
		}
	}
	return written, nil
}
