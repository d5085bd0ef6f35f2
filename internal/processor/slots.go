package processor

import (
	"context"
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
// slotIdle, to start again with the next.
type foldSlots struct {
	free chan *foldSlot
}

// foldSlot is one slot: the calls handed to its goroutine, if it runs.
type foldSlot struct {
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
	s := &foldSlots{free: make(chan *foldSlot, n)}
	for range n {
		s.free <- &foldSlot{calls: make(chan func()), idle: slotIdle, ended: make(chan struct{}, 1)}
	}
	return s
}

// size is the number of slots.
func (s *foldSlots) size() int { return cap(s.free) }

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
// returns once fn has returned. Only the slot's holder may call it.
func (sl *foldSlot) run(fn func()) {
	done := make(chan struct{})
	call := func() {
		defer close(done)
		fn()
	}
	for {
		if !sl.running {
			sl.running = true
			sl.started++
			go sl.work(call)
			break
		}
		select {
		case sl.calls <- call:
		case <-sl.ended: // idled out: start it again
			sl.running = false
			continue
		}
		break
	}
	<-done
}

// work runs the slot's calls until it has waited sl.idle for one. It says
// it ended however it ends, a call that ends its goroutine
// (runtime.Goexit) included, so that the next run starts another.
func (sl *foldSlot) work(fn func()) {
	defer func() { sl.ended <- struct{}{} }()
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
		}
	}
}

// reserveStack keeps pad, a frame the compiler may not drop.
//
//go:noinline
func reserveStack(pad *[slotReserve]byte) { pad[0] = 1 }
