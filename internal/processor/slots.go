package processor

import (
	"context"
	"sync"
	"time"
)

// foldSlots bounds the summarizer calls running at once (MaxConcurrentFolds,
// shared by a process's engines) and runs each call on its slot's own
// goroutine, kept from one call to the next.
//
// A call of the offline summarizer uses a stack of 64-128 KiB (frames of
// tens of KiB hold its word counts). A fold's goroutine starts with a few
// KiB and reached that by copying its stack at each doubling, into memory
// fresh to the cache, once per fold: in CPU profiles of the ingest bench at
// 1,000 sessions (-cpuprofile, runtime.newstack) 25-84 µs a fold, 8-20% of
// the summarizer's time. A slot's goroutine keeps
// its grown stack: it waits for the next call below a frame of
// slotReserve bytes, so that the garbage collector, which halves the stack
// of a goroutine using less than a quarter of it, leaves it as it is. A
// slot's goroutine starts with its first call and ends after idling for
// slotIdle, to start again with the next, or when the last engine using
// the slots stops (open, close).
type foldSlots struct {
	free chan *foldSlot

	mu      sync.Mutex
	changed *sync.Cond // a goroutine of gen ended
	engines int        // engines running on these slots (open, close)
	gen     *slotGen   // what the slots' goroutines started now end with
}

// slotGen is what the slots' goroutines started between two stops of
// their last engine share: quit, closed at the stop, and how many of them
// still run. Guarded by foldSlots.mu.
type slotGen struct {
	quit chan struct{}
	live int
}

// foldSlot is one slot: the calls handed to its goroutine, if it runs.
type foldSlot struct {
	pool    *foldSlots
	calls   chan func()
	idle    time.Duration // slotIdle
	running bool          // its goroutine runs; set and read only by the slot's holder
	ended   chan struct{}
	started int // goroutines started for it so far (tests)
}

const (
	// slotIdle is how long a slot's goroutine waits for a call before it ends.
	slotIdle = 30 * time.Second
	// slotReserve is the stack a waiting slot's goroutine keeps in use.
	slotReserve = 32 << 10
)

func newFoldSlots(n int) *foldSlots {
	s := &foldSlots{free: make(chan *foldSlot, n), gen: &slotGen{quit: make(chan struct{})}}
	s.changed = sync.NewCond(&s.mu)
	for range n {
		s.free <- &foldSlot{pool: s, calls: make(chan func()), idle: slotIdle, ended: make(chan struct{}, 1)}
	}
	return s
}

// size is the number of slots.
func (s *foldSlots) size() int { return cap(s.free) }

// open registers an engine that runs folds on the slots, until its close.
func (s *foldSlots) open() {
	s.mu.Lock()
	s.engines++
	s.mu.Unlock()
}

// close unregisters an engine. When no engine is left, it ends every
// slot's goroutine and returns once they have ended: a stopped processor
// leaves no goroutine behind. A call still running (a fold its engine
// did not wait for) ends first; calls made with no engine open run on
// their caller's goroutine.
func (s *foldSlots) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engines--; s.engines > 0 {
		return
	}
	g := s.gen
	s.gen = &slotGen{quit: make(chan struct{})}
	close(g.quit)
	for g.live > 0 {
		s.changed.Wait()
	}
}

// starting counts a slot's goroutine about to start and returns its
// generation; nil when no engine is open.
func (s *foldSlots) starting() *slotGen {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engines == 0 {
		return nil
	}
	s.gen.live++
	return s.gen
}

// gone counts a slot's goroutine of g ended.
func (s *foldSlots) gone(g *slotGen) {
	s.mu.Lock()
	g.live--
	s.mu.Unlock()
	s.changed.Broadcast()
}

// take waits for a free slot, or for ctx to end. The slot must be given
// back (give).
func (s *foldSlots) take(ctx context.Context) (*foldSlot, error) {
	select {
	case sl := <-s.free:
		return sl, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// give frees a slot taken.
func (s *foldSlots) give(sl *foldSlot) { s.free <- sl }

// run calls fn on the slot's goroutine (started if it does not run) and
// returns once fn has returned; with no engine open, on the caller's
// goroutine. Only the slot's holder may call it.
func (sl *foldSlot) run(fn func()) {
	done := make(chan struct{})
	call := func() {
		defer close(done)
		fn()
	}
	for {
		if !sl.running {
			g := sl.pool.starting()
			if g == nil {
				call()
				break
			}
			sl.running = true
			sl.started++
			go sl.work(call, g)
			break
		}
		select {
		case sl.calls <- call:
		case <-sl.ended: // idled out or stopped: start it again
			sl.running = false
			continue
		}
		break
	}
	<-done
}

// work runs the slot's calls until it has waited sl.idle for one, or its
// generation is stopped. It says it ended however it ends, a call that
// ends its goroutine (runtime.Goexit) included, so that the next run
// starts another.
func (sl *foldSlot) work(fn func(), g *slotGen) {
	defer func() {
		sl.ended <- struct{}{}
		sl.pool.gone(g)
	}()
	var pad [slotReserve]byte
	reserveStack(&pad)
	t := time.NewTimer(sl.idle)
	defer t.Stop()
	for {
		fn()
		t.Reset(sl.idle) // a firing not received is dropped (timers since Go 1.23)
		select {
		case fn = <-sl.calls:
		case <-t.C:
			return
		case <-g.quit:
			return
		}
	}
}

// reserveStack keeps pad, a frame the compiler may not drop.
//
//go:noinline
func reserveStack(pad *[slotReserve]byte) { pad[0] = 1 }
