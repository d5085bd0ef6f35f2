package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkContextQueryWarm10k is the CPU side of a question-aware
// context with its index warm: a 10,000-turn session (6-30 words a turn
// from a Zipf-distributed vocabulary, four speakers, a day every 1,000
// turns), questions of one to five words of it, budget 10,000 chars,
// answered in-process (no request round trip).
func BenchmarkContextQueryWarm10k(b *testing.B) {
	_, ask := querySession(b, 10_000)
	ask(0) // the index is built
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ask(i)
		i++
	}
}

// BenchmarkContextQueryPacked5k is BenchmarkContextQueryWarm10k at
// 5,000 turns with the index held packed only, as the scale line's
// requests find it (a budget full of sessions, each asked after a
// pause): each request decodes it for itself and leaves it packed.
func BenchmarkContextQueryPacked5k(b *testing.B) {
	d, ask := querySession(b, 5_000)
	ask(0) // the index is built
	d.PersistIndexes(context.Background())
	d.DemoteIndexes()
	d.PromoteWithin(0)
	ask(1)
	if d.PackedSessions() != 1 {
		b.Fatalf("%d sessions packed, want 1", d.PackedSessions())
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ask(i)
		i++
	}
}

// querySession publishes a session s1 of n turns (6-30 words a turn from
// a Zipf-distributed vocabulary, four speakers, a day every 1,000 turns),
// checkpointed 50 turns before its end, and returns an instance and a
// question-aware request of it: questions of one to five words of it,
// budget 10,000 chars, answered in-process (no request round trip).
func querySession(b *testing.B, n int) (*service.Direct, func(i int) *client.Context) {
	e := servicetest.New(b, servicetest.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	base := strings.Fields(`tournament form friday tokyo match hulk shark team comp bob alice carol dave
		battery remote design price budget meeting decision plan ticket train hotel dinner lisbon saturday
		monday report deadline invoice client server deploy bug test release version camera screen button
		colour rubber plastic case wheel scroll voice speech market research trend fashion fruit spongy`)
	words := base
	for i := 0; len(words) < 3000; i++ {
		words = append(words, fmt.Sprintf("%s%d", base[i%len(base)], i/len(base)))
	}
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(words)-1))
	speakers := []string{"Alice", "Bob", "Carol", "Dave"}
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	for i := range n {
		ws := make([]string, 6+rng.IntN(25))
		for j := range ws {
			ws[j] = words[zipf.Uint64()]
		}
		tu := events.Turn{V: 1, Session: "s1", TurnID: fmt.Sprintf("t%05d", i), At: start.Add(time.Duration(i) * 86400 * time.Second / 1000),
			Speaker: speakers[i%len(speakers)], Role: "user", Kind: "speech", Text: strings.Join(ws, " ") + "."}
		data, _ := json.Marshal(tu)
		if _, err := e.JS.PublishAsync(e.Layout.Subjects.In("s1", events.KindTurn), data, jetstream.WithStallWait(30*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	<-e.JS.PublishAsyncComplete()
	checkpointFrom(b, e, "s1", int64(n-50))
	d, err := service.NewDirect(b, context.Background(), e.JS, e.Layout, e.Store, e.Log)
	if err != nil {
		b.Fatal(err)
	}
	queries := make([]string, 40)
	for i := range queries {
		q := []string{"What", "did", "they", "say", "about"}
		for range 1 + rng.IntN(5) {
			q = append(q, words[rng.IntN(len(words)/4)])
		}
		queries[i] = strings.Join(q, " ") + "?"
	}
	return d, func(i int) *client.Context {
		c, err := d.Context(context.Background(), client.ContextRequest{Session: "s1", Query: queries[i%len(queries)], BudgetChars: 10000})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
}
