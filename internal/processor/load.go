package processor

import (
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/state"
)

// maxLoads bounds the checkpoint reads one shard has in flight.
const maxLoads = 64

// loadDone is a checkpoint read off the shard goroutine.
type loadDone struct {
	gen uint64 // the shard's generation when it started (reset bumps it)
	id  string
	s   *state.Session
	rev uint64
	err error
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

// startLoads starts queued checkpoint reads up to maxLoads.
func (sh *shard) startLoads() {
	for sh.loads < maxLoads && len(sh.loadQ) > 0 {
		id := sh.loadQ[0]
		sh.loadQ = sh.loadQ[1:]
		if len(sh.loadQ) == 0 {
			sh.loadQ = nil // let a burst's backing array go
		}
		sh.loads++
		gen := sh.gen
		go func() {
			ctx, cancel := sh.ctx()
			defer cancel()
			s, rev, err := sh.p.store.Load(ctx, id)
			sh.loaded <- loadDone{gen: gen, id: id, s: s, rev: rev, err: err}
		}()
	}
}

// landLoad installs a session read aside and applies its parked events.
func (sh *shard) landLoad(d loadDone) {
	sh.loads--
	defer sh.startLoads()
	if d.gen != sh.gen {
		return // read before a rewind: its events come again
	}
	queued := sh.loading[d.id]
	delete(sh.loading, d.id)
	if d.err != nil {
		sh.p.requestRewind("session_load_failed", fmt.Errorf("session %s: %w", d.id, d.err))
		return
	}
	if _, ok := sh.sessions[d.id]; !ok {
		sh.install(d.id, d.s, d.rev)
	}
	for _, m := range queued {
		sh.handle(m)
	}
}
