package processor

import (
	"context"

	"github.com/foldstream/foldstream/internal/state"
	"github.com/rs/zerolog"
)

// aside runs a shard's KV and stream calls off its event loop: a call that
// waits for the server (a summary read, an archive write, a chunk drop, a
// quarantined session's rebuild) holds only the session that depends on
// it, which waits meanwhile (waitIO, its events held), never the loop's
// other sessions. Each call returns the step that lands its outcome; the
// loop takes it from done and runs it (land).
type aside struct {
	done  chan func()
	n     int // calls whose step is not back yet
	store *state.Store
	log   zerolog.Logger
}

func newAside(store *state.Store, log zerolog.Logger) *aside {
	return &aside{done: make(chan func(), 64), store: store, log: log}
}

// run starts do on a goroutine of its own, bounded by opCtx; the step it
// returns (nil: none) runs on the loop. Must be called on the loop.
func (a *aside) run(do func(ctx context.Context) func()) {
	a.n++
	go func() {
		ctx, cancel := opCtx()
		step := do(ctx)
		cancel()
		a.done <- step
	}()
}

// land runs a step that came back on done. Must be called on the loop.
func (a *aside) land(step func()) {
	a.n--
	if step != nil {
		step()
	}
}

// busy reports whether calls are out. Must be called on the loop.
func (a *aside) busy() bool { return a.n > 0 }

// dropChunks removes the sealed ref chunks the cursor has passed, from
// oldCursor to newCursor, off the loop; failures leave only garbage, so
// they are logged, not fatal. Must be called on the loop.
func (a *aside) dropChunks(s *state.Session, oldCursor, newCursor int64) {
	if s.Sealed <= oldCursor {
		return
	}
	id, epoch, sealed := s.ID, s.Epoch, s.Sealed
	a.run(func(ctx context.Context) func() {
		if err := a.store.DropChunks(ctx, id, epoch, oldCursor, newCursor, sealed); err != nil {
			a.log.Warn().Err(err).Str("event", "chunk_cleanup_failed").Str("session", id).Msg("could not remove folded ref chunks")
		}
		return nil
	})
}
