package service

import (
	"context"
	"testing"
	"time"
)

// The index store's writer takes a replay no request is using at once,
// waits for a pause in the requests of one being asked unless more is
// queued, and gives up waiting when the service stops.
func TestWriterWaitsForAPauseInRequests(t *testing.T) {
	e := &cacheEntry{}
	if !afterPause(context.Background(), e, nil) {
		t.Fatal("a replay never asked for: expected to be written")
	}
	e.asked.Store(time.Now().UnixNano())
	if !afterPause(context.Background(), e, nil) {
		t.Fatal("a replay asked for: expected to be written after a pause")
	}
	if quiet := time.Since(time.Unix(0, e.asked.Load())); quiet < writePause {
		t.Fatalf("written %v after its last request, before a pause of %v", quiet, writePause)
	}
	// More to write: no wait.
	queue := make(chan *cacheEntry, 1)
	queue <- &cacheEntry{}
	e.asked.Store(time.Now().UnixNano())
	if !afterPause(context.Background(), e, queue) || time.Since(time.Unix(0, e.asked.Load())) >= writePause {
		t.Fatal("more queued: expected to be written at once")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.asked.Store(time.Now().UnixNano())
	if afterPause(ctx, e, nil) {
		t.Fatal("the service stopped during the pause: expected the flush to write it instead")
	}
}
