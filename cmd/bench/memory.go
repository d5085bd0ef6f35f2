package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// memorySection measures the processor binary's resident memory per live
// session: RSS of the child process with every session in memory and idle,
// minus its RSS right after start, over the sessions it holds.
func memorySection(ctx context.Context, w io.Writer, o opts) error {
	n := o.memSessions * o.memTurns
	fmt.Fprintf(w, "memory: processor binary as a child process, %d sessions x %d turns, all applied, checkpointed, then idle %s\n", o.memSessions, o.memTurns, o.memWait)
	if len(o.memArgs) > 0 {
		fmt.Fprintf(w, "  processor flags: %s\n", strings.Join(o.memArgs, " "))
	}
	var rssPer, heapPer, rssBase, rssFull, live, packed []float64
	for range o.runs {
		r, err := memoryRun(ctx, o, n)
		if err != nil {
			return err
		}
		rssPer, heapPer = append(rssPer, r.rssPer), append(heapPer, r.heapPer)
		rssBase, rssFull, live = append(rssBase, r.rss0/(1<<20)), append(rssFull, r.rss1/(1<<20)), append(live, r.live)
		packed = append(packed, r.packed)
	}
	fmt.Fprintf(w, "  %-44s %s\n", "sessions in memory", medSpread(live, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "of which packed (compact idle form)", medSpread(packed, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "RSS after start MiB", medSpread(rssBase, "%.1f"))
	fmt.Fprintf(w, "  %-44s %s\n", "RSS with the sessions MiB", medSpread(rssFull, "%.1f"))
	fmt.Fprintf(w, "  %-44s %s\n", "RSS per live session B (target <= 2048)", medSpread(rssPer, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "Go heap allocated per live session B (incl. garbage)", medSpread(heapPer, "%.0f"))
	return nil
}

type memResult struct{ rss0, rss1, live, packed, rssPer, heapPer float64 }

func memoryRun(ctx context.Context, o opts, n int) (memResult, error) {
	sessions := o.memSessions
	var r memResult
	e, err := newEnv(true)
	if err != nil {
		return r, err
	}
	defer e.close()
	l, _, err := e.provision(ctx, "fold")
	if err != nil {
		return r, err
	}
	c, err := startChild(e.ns.ClientURL(), append([]string{"--max-concurrent-folds", "1"}, o.memArgs...)...)
	if err != nil {
		return r, err
	}
	defer c.stop()
	if err := c.waitReady(ctx); err != nil {
		return r, err
	}
	time.Sleep(time.Second)
	rss0, err := c.rss()
	if err != nil {
		return r, err
	}
	heap0, err := liveHeap(c)
	if err != nil {
		return r, err
	}
	subs, data := payloads(l.Subjects, n, sessions, false, false)
	if err := publishAll(ctx, e.js, subs, data); err != nil {
		return r, err
	}
	if err := waitAcked(ctx, e.js, l.In, uint64(n)); err != nil {
		return r, err
	}
	// Idle: every session checkpointed, nothing in flight. The processor
	// packs a session 1 s after its last event (--idle-compact) and
	// returns the freed heap to the OS once that wave is over; 2 s covers
	// both. -mem-wait reads later (the heap then grows back toward the
	// GC's goal); see docs/benchmarks.md.
	time.Sleep(o.memWait)
	rss1, err := c.rss()
	if err != nil {
		return r, err
	}
	heap1, err := liveHeap(c)
	if err != nil {
		return r, err
	}
	live, err := c.metric("foldstream_sessions_in_memory")
	if err != nil {
		return r, err
	}
	if live < 1 {
		return r, fmt.Errorf("no session in memory")
	}
	packed, err := c.metric("foldstream_sessions_packed")
	if err != nil {
		return r, err
	}
	r = memResult{rss0: float64(rss0), rss1: float64(rss1), live: live, packed: packed,
		rssPer: float64(rss1-rss0) / live, heapPer: (heap1 - heap0) / live}
	return r, nil
}

// liveHeap is the child's allocated Go heap (go_memstats_heap_alloc_bytes).
// The processor does not force garbage collections, so it includes garbage
// not collected yet; see docs/benchmarks.md.
func liveHeap(c *child) (float64, error) {
	return c.metric("go_memstats_heap_alloc_bytes")
}
