package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/nats-io/nats.go"
)

// writeTally counts what the processor writes while an ingest run is
// timed (FOLDSTREAM_BENCH_DEBUG): messages and payload bytes per kind,
// the checkpoints (KV values of sessions) and the outbound kinds (summary,
// event, memory, ...). It listens with a core subscription of its own, so
// it costs the run a little CPU: only when asked for.
type writeTally struct {
	mu sync.Mutex
	n  map[string]int
	b  map[string]int
}

// tallyWrites subscribes to the bucket's and the outbound stream's subjects.
func tallyWrites(nc *nats.Conn, l broker.Layout) (*writeTally, error) {
	t := &writeTally{n: map[string]int{}, b: map[string]int{}}
	kvPrefix := "$KV." + l.Bucket + "."
	outPrefix := l.Subjects.Prefix + ".out."
	handle := func(m *nats.Msg) {
		kind := "other"
		switch {
		case strings.HasPrefix(m.Subject, kvPrefix):
			kind = "KV checkpoint"
			if strings.Contains(m.Subject[len(kvPrefix):], ".") {
				kind = "KV other" // ref chunks, due marks
			}
		case strings.HasPrefix(m.Subject, outPrefix):
			kind = "out " + m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		}
		t.mu.Lock()
		t.n[kind]++
		t.b[kind] += len(m.Data)
		t.mu.Unlock()
	}
	for _, subject := range []string{kvPrefix + ">", l.Subjects.OutAll()} {
		if _, err := nc.Subscribe(subject, handle); err != nil {
			return nil, err
		}
	}
	return t, nc.Flush()
}

// print writes the tally, one kind a line.
func (t *writeTally) print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kinds := make([]string, 0, len(t.n))
	for k := range t.n {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  written %-16s %7d messages %9d bytes (%d a message)\n", k, t.n[k], t.b[k], t.b[k]/max(t.n[k], 1))
	}
}
