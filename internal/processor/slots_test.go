package processor

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// openSlots is n slots with one engine open on them until the test ends.
func openSlots(t *testing.T, n int) *foldSlots {
	slots := newFoldSlots(n)
	slots.open()
	t.Cleanup(slots.close)
	return slots
}

func TestSlotRunsItsCallsOnOneGoroutine(t *testing.T) {
	slots := openSlots(t, 1)
	sl, err := slots.take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for i := 1; i <= 5; i++ {
		sl.run(func() { sum += i })
	}
	if sum != 15 {
		t.Fatalf("calls added up to %d, want 15: run returned before its call did", sum)
	}
	if sl.started != 1 {
		t.Fatalf("5 calls started %d goroutines, want 1 kept from call to call", sl.started)
	}
	slots.give(sl)
}

func TestSlotStartsAgainAfterIdling(t *testing.T) {
	slots := openSlots(t, 1)
	sl, _ := slots.take(context.Background())
	sl.idle = time.Millisecond
	ran := 0
	sl.run(func() { ran++ })
	for len(sl.ended) == 0 { // the goroutine says it ended
		time.Sleep(time.Millisecond)
	}
	sl.run(func() { ran++ })
	if ran != 2 || sl.started != 2 {
		t.Fatalf("after the goroutine idled out: %d calls ran on %d goroutines, want 2 on 2", ran, sl.started)
	}
}

// A call that ends the slot's goroutine without returning (runtime.Goexit,
// as t.FailNow in a fake summarizer does) leaves the slot usable: the next
// call runs on a new goroutine instead of waiting for one that is gone.
func TestSlotRunsAfterACallEndedItsGoroutine(t *testing.T) {
	slots := openSlots(t, 1)
	sl, _ := slots.take(context.Background())
	sl.run(runtime.Goexit)
	ran := make(chan struct{})
	go sl.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the call after one that ended the slot's goroutine did not run")
	}
	if sl.started != 2 {
		t.Fatalf("%d goroutines started, want 2", sl.started)
	}
}

func TestSlotsBoundTheCallsAtOnce(t *testing.T) {
	slots := newFoldSlots(2)
	a, _ := slots.take(context.Background())
	b, _ := slots.take(context.Background())
	if a == b {
		t.Fatal("two takes got the same slot")
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		sl, err := slots.take(ctx)
		if sl != nil {
			err = errors.New("got a third slot of two")
		}
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("a take with both slots held returned %v, want the context's end", err)
	}
	slots.give(a)
	if sl, err := slots.take(context.Background()); err != nil || sl != a {
		t.Fatalf("take after a give = %p, %v; want the slot given back", sl, err)
	}
}

// The slots' goroutines end when the last engine using them stops, not
// slotIdle later; one engine of two stopping leaves them running.
func TestSlotGoroutinesEndWhenTheLastEngineStops(t *testing.T) {
	slots := newFoldSlots(1)
	slots.open()
	slots.open()
	sl, _ := slots.take(context.Background())
	sl.run(func() {})
	slots.give(sl)
	slots.close()
	if len(sl.ended) != 0 {
		t.Fatal("the slot's goroutine ended when one of its two engines stopped")
	}
	sl, _ = slots.take(context.Background())
	sl.run(func() {})
	if sl.started != 1 {
		t.Fatalf("%d goroutines started, want 1 kept while an engine runs", sl.started)
	}
	slots.give(sl)
	slots.close() // returns once the goroutine has ended
	if len(sl.ended) != 1 {
		t.Fatal("the slot's goroutine still runs after the last engine stopped")
	}
	// With no engine open, a call runs on its caller's goroutine.
	sl, _ = slots.take(context.Background())
	ran := false
	sl.run(func() { ran = true })
	if !ran || sl.started != 1 {
		t.Fatalf("with no engine open: ran %v, %d goroutines started, want the call run and none started", ran, sl.started)
	}
	slots.give(sl)
	slots.open()
	defer slots.close()
	sl, _ = slots.take(context.Background())
	sl.run(func() {})
	if sl.started != 2 {
		t.Fatalf("after an engine opened again: %d goroutines started, want 2", sl.started)
	}
	slots.give(sl)
}
