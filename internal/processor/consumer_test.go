package processor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
)

// An engine deletes every consumer it takes for its own at attach, so the
// names it takes must be exactly its configured one and the fresh names it
// makes from it: never another partition's, never a consumer that only
// starts like it.
func TestOwnConsumerNames(t *testing.T) {
	id := nuid.Next()
	for _, c := range []struct {
		base, name string
		own        bool
	}{
		{"foldstream", "foldstream", true},
		{"foldstream", "foldstream-r" + id, true},
		{"foldstream", "foldstream-rollup", false},
		{"foldstream", "foldstream-r" + id + "x", false},
		{"foldstream", "foldstream-r" + id[:21] + "-", false},
		{"foldstream", "foldstream-p1of6", false},
		{"foldstream", "foldstream-p1of6-r" + id, false},
		{"foldstream-p1of6", "foldstream-p1of6-r" + id, true},
		{"foldstream-p1of6", "foldstream-p1of60-r" + id[1:], false},
		{"foldstream-p1of6", "foldstream", false},
		{"foldstream", "heal-probe", false},
	} {
		if got := ownConsumerName(c.base, c.name); got != c.own {
			t.Errorf("ownConsumerName(%q, %q) = %v, want %v", c.base, c.name, got, c.own)
		}
	}
}

// A rewind asked for after an attach and before its consume loop took the
// iterator (requestRewind finds none to stop) is kept: the loop returns at
// once, where it used to wait on a consumer that may never deliver again
// (the rewind's cause), with every later request a no-op.
func TestConsumersKeepARewindAskedBeforeTheLoop(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm := newConsumers(Config{}.withDefaults(), r.JS, r.Layout, nil, r.Log, prometheus.NewCounter(prometheus.CounterOpts{Name: "rewinds"}))
	var err error
	if cm.stream, err = r.JS.Stream(ctx, r.Layout.In); err != nil {
		t.Fatal(err)
	}
	cm.hooks.dispatch = func(jetstream.Msg, uint64, time.Time) { t.Error("a delivery was dispatched; the stream is empty") }
	var drops sync.WaitGroup
	defer drops.Wait()
	it, cons, _, err := cm.attach(ctx, &drops)
	if err != nil {
		t.Fatal(err)
	}
	cm.requestRewind("test", errors.New("asked between the attach and the loop"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		cm.consume(ctx, it, cons)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the consume loop is still waiting for a delivery 10 s after a rewind was asked for")
	}
	if !cm.rewinding() {
		t.Fatal("the rewind asked for is no longer pending")
	}
}
