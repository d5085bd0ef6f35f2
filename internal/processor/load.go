package processor

import (
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/state"
)

// A shard reads checkpoints of new sessions in batches (state.LoadMany:
// one request per batch), at most maxLoads batches in flight.
const (
	maxLoads     = 4
	maxLoadBatch = 128
)

// loadDone is a batch of checkpoints read off the shard goroutine.
type loadDone struct {
	gen   uint64 // the shard's generation when it started (reset bumps it)
	items []state.Loaded
}

// accept applies an event, or parks it behind its session's checkpoint
// read. A session seen for the first time costs a KV read: done on the
// shard goroutine, every other session of the shard would wait for that
// round trip (and, once the shard's queue is full, every shard). So the
// read runs aside and the session's events wait for it, in order, while
// other sessions go on.
func (sh *shard) accept(m inMsg) {
	sh.lastIn = time.Now() // wall time: flush pacing, not session logic
	if m.perr != nil {
		sh.handle(m) // rejected without a session
		return
	}
	// Parked events go first: a session installed meanwhile by a
	// synchronous get (a fold result, a wake) still waits for them.
	if q, ok := sh.loading[m.session]; ok {
		sh.loading[m.session] = append(q, m)
		return
	}
	if _, ok := sh.sessions[m.session]; ok {
		sh.handle(m)
		return
	}
	sh.loading[m.session] = []inMsg{m}
	sh.loadQ = append(sh.loadQ, m.session)
	sh.startLoads()
}

// startLoads starts reading queued sessions, in batches.
func (sh *shard) startLoads() {
	for sh.loads < maxLoads && len(sh.loadQ) > 0 {
		n := min(len(sh.loadQ), maxLoadBatch)
		ids := sh.loadQ[:n:n]
		sh.loadQ = sh.loadQ[n:]
		if len(sh.loadQ) == 0 {
			sh.loadQ = nil // let a burst's backing array go
		}
		sh.loads++
		gen := sh.gen
		go func() {
			ctx, cancel := sh.ctx()
			defer cancel()
			sh.loaded <- loadDone{gen: gen, items: sh.p.store.LoadMany(ctx, ids)}
		}()
	}
}

// landLoad installs sessions read aside and applies their parked events.
func (sh *shard) landLoad(d loadDone) {
	sh.loads--
	defer sh.startLoads()
	if d.gen != sh.gen {
		return // read before a rewind: their events come again
	}
	for _, l := range d.items {
		queued := sh.loading[l.ID]
		delete(sh.loading, l.ID)
		if l.Err != nil {
			sh.p.requestRewind("session_load_failed", fmt.Errorf("session %s: %w", l.ID, l.Err))
			return
		}
		if _, ok := sh.sessions[l.ID]; !ok {
			sh.install(l.ID, l.S, l.Rev)
		}
		for _, m := range queued {
			sh.handle(m)
		}
	}
}
