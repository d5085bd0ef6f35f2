package main

import (
	"bytes"
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
			if kind == "out event" {
				kind += " " + eventType(m.Data)
			}
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

// eventType is a lifecycle event's type and, for a skip, its reason
// (compaction_skipped:already_in_flight), read without decoding it.
func eventType(data []byte) string {
	field := func(key string) string {
		i := bytes.Index(data, []byte(`"`+key+`":"`))
		if i < 0 {
			return ""
		}
		v := data[i+len(key)+4:]
		if j := bytes.IndexByte(v, '"'); j >= 0 {
			return string(v[:j])
		}
		return ""
	}
	typ := field("type")
	if r := field("reason"); r != "" && typ == "compaction_skipped" {
		typ += ":" + r
	}
	return typ
}

// print writes the tally, one kind a line; with folds > 0, also each
// kind's messages and bytes per fold, and all kinds' together.
func (t *writeTally) print(w io.Writer, folds uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kinds := make([]string, 0, len(t.n))
	for k := range t.n {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	n, b := 0, 0
	for _, k := range kinds {
		fmt.Fprintf(w, "  written %-38s %7d messages %9d bytes (%d a message)", k, t.n[k], t.b[k], t.b[k]/max(t.n[k], 1))
		if folds > 0 {
			fmt.Fprintf(w, ", %.2f messages %.0f bytes a fold", float64(t.n[k])/float64(folds), float64(t.b[k])/float64(folds))
		}
		fmt.Fprintln(w)
		n, b = n+t.n[k], b+t.b[k]
	}
	if folds > 0 {
		fmt.Fprintf(w, "  written in all: %d messages %d bytes, %.2f messages %.0f bytes a fold (%d folds)\n", n, b, float64(n)/float64(folds), float64(b)/float64(folds), folds)
	}
}
