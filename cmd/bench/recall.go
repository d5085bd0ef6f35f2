package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// recallSection measures the question-aware context on one long session
// (-recall-turns, 10,000 by default), folded by the processor: the
// context with a query warm (the session's recall index in memory), warm
// with a new turn published before each request (a bot asking on every
// prompt), cold (the index built from the stream for the request), and
// the first request of a new service instance (the index loaded from
// the store the earlier instances wrote: a restart or a second instance),
// beside the per-request scan of the stream that recall did before the
// index (--recall-index-bytes 0) and the context without a query, in the
// same run on the same server.
func recallSection(ctx context.Context, w io.Writer, o opts) error {
	n := o.recallTurns
	fmt.Fprintf(w, "recall: one session of %d turns (folded, mode window), requests from a builder's connection; p50 / p99 ms\n", n)
	rows := make([]latencies, len(recallRows))
	var bytes, items, preload []float64
	for range o.runs {
		r, err := recallRun(ctx, n)
		if err != nil {
			return err
		}
		for i, l := range r.lat {
			rows[i].add(l)
		}
		bytes = append(bytes, r.indexBytes/(1<<20))
		preload = append(preload, r.preload)
		items = append(items, float64(r.recalledItems)/float64(max(1, r.recalled)))
	}
	for i, name := range recallRows {
		l := rows[i]
		fmt.Fprintf(w, "  %-60s p50 %s  p99 %s\n", name, medSpread(l.p50, "%.2f"), medSpread(l.p99, "%.2f"))
	}
	// Side by side: the index in memory, loaded from the store by a new
	// instance, built from the stream.
	side := func(i int) string {
		return fmt.Sprintf("%.2f / %.2f", median(rows[i].p50), median(rows[i].p99))
	}
	fmt.Fprintf(w, "  %-60s warm %s | first after a restart %s (target p99 <= 2x warm) | loaded from the store %s | cold %s\n",
		"context with query, p50 / p99 ms", side(recallWarm), side(recallRestart), side(recallLoaded), side(recallCold))
	fmt.Fprintf(w, "  %-60s %s\n", "restart: stored indexes preloaded in, ms", medSpread(preload, "%.1f"))
	fmt.Fprintf(w, "  %-60s %s\n", fmt.Sprintf("recall index of the session, MiB (%d turns)", n), medSpread(bytes, "%.1f"))
	fmt.Fprintf(w, "  %-60s %s\n", "items recalled per context with query, budget 10000 chars", medSpread(items, "%.1f"))
	if o.recallSessions > 0 {
		return recallScale(ctx, w, o.recallSessions, o.recallSessionTurns, o.recallScaleBudget, o.recallScaleRef, o.recallScaleDir, o.recallScaleMemory, nil)
	}
	return nil
}

// recallRows names the measurements of a recallRun, in its order.
var recallRows = []string{
	"context, no query (today's builder)",
	"context with query, index warm (target p99 <= 10 ms)",
	"context with query, warm, a new turn before each request",
	"context with query, index cold (target p99 <= 150 ms)",
	"context with query, first after a restart (preloaded)",
	"context with query, loaded from the store (evicted)",
	"recall endpoint, index warm",
	"recall endpoint, per-request stream scan (no index)",
	"context with query, per-request stream scan (no index)",
}

// The rows of the side-by-side line.
const (
	recallWarm    = 1
	recallCold    = 3
	recallRestart = 4
	recallLoaded  = 5
)

type recallResult struct {
	lat        [][]time.Duration // sorted, one per recallRows
	indexBytes float64
	// recalled counts the contexts with a query, recalledItems what
	// they recalled.
	recalled, recalledItems int
	// preload is the median time a new instance took to preload the
	// stored index, ms.
	preload float64
}

// recallWords is the vocabulary of the generated conversation: a Zipf
// distribution over it gives a few very common words and a long tail, as
// speech has.
func recallWords() []string {
	base := strings.Fields(`tournament form friday tokyo match hulk shark team comp bob alice carol dave
		battery remote design price budget meeting decision plan ticket train hotel dinner lisbon saturday
		monday report deadline invoice client server deploy bug test release version camera screen button
		colour rubber plastic case wheel scroll voice speech market research trend fashion fruit spongy`)
	words := slices.Clone(base)
	for i := 0; len(words) < 3000; i++ {
		words = append(words, fmt.Sprintf("%s%d", base[i%len(base)], i/len(base)))
	}
	return words
}

// recallConversation is n turns of session s with 6-30 words each.
func recallConversation(session string, n int) []events.Turn {
	rng := rand.New(rand.NewPCG(1, 2))
	words := recallWords()
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(words)-1))
	speakers := []string{"Alice", "Bob", "Carol", "Dave"}
	base := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	turns := make([]events.Turn, n)
	for i := range turns {
		k := 6 + rng.IntN(25)
		ws := make([]string, k)
		for j := range ws {
			ws[j] = words[zipf.Uint64()]
		}
		turns[i] = events.Turn{V: 1, Session: session, TurnID: fmt.Sprintf("t%05d", i), At: base.Add(time.Duration(i) * 5 * time.Second),
			Speaker: speakers[i%len(speakers)], Role: "user", Kind: "speech", Text: strings.Join(ws, " ") + "."}
	}
	return turns
}

func recallRun(ctx context.Context, n int) (recallResult, error) {
	var res recallResult
	e, err := newEnv(false)
	if err != nil {
		return res, err
	}
	defer e.close()
	l, store, err := e.foldStore(ctx)
	if err != nil {
		return res, err
	}
	const session = "long-1"
	turns := recallConversation(session, n+200)
	subs, data := make([]string, n), make([][]byte, n)
	for i := range n {
		subs[i] = l.Subjects.In(session, events.KindTurn)
		data[i], _ = json.Marshal(turns[i])
	}
	if err := publishAll(ctx, e.js, subs, data); err != nil {
		return res, err
	}
	stop, err := runProcessor(ctx, e, l, store, processor.Config{MaxConcurrentFolds: 32})
	if err != nil {
		return res, err
	}
	defer stop()
	// Settled: every turn applied and folded up to the recent window.
	window := int64(fold.DefaultWindow().Recent)
	for {
		cp, _, err := store.Load(ctx, session)
		if err != nil {
			return res, err
		}
		if cp.Total == int64(n) && cp.Cursor >= int64(n)-window-10 && cp.Lease == nil {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}

	bnc, _, err := connect(e.ns, "bench-builder")
	if err != nil {
		return res, err
	}
	defer bnc.Close()
	ask := func(endpoint string, req any) (time.Duration, error) {
		body, _ := json.Marshal(req)
		start := time.Now()
		m, err := bnc.RequestWithContext(ctx, client.ServiceSubject("fold", endpoint), body)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
			return 0, fmt.Errorf("%s: %s %s", endpoint, code, m.Header.Get(micro.ErrorHeader))
		}
		if r, ok := req.(client.ContextRequest); ok && r.Query != "" {
			// A context that recalled nothing would measure nothing.
			var c client.Context
			if err := json.Unmarshal(m.Data, &c); err != nil {
				return 0, err
			}
			res.recalled++
			res.recalledItems += len(c.Recalled)
		}
		return took, nil
	}
	queries := recallQueries(40)
	next := n // the next turn to publish
	// measure runs k requests against a service started with opts.
	measure := func(k int, before func() error, req func(i int) (string, any), opts ...service.Option) ([]time.Duration, error) {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		svc, err := service.Start(sctx, e.nc, e.js, l, store, nil, benchLog(), opts...)
		if err != nil {
			return nil, err
		}
		defer func() { _ = svc.Stop() }()
		var out []time.Duration
		for i := range k {
			if before != nil {
				if err := before(); err != nil {
					return nil, err
				}
			}
			endpoint, r := req(i)
			d, err := ask(endpoint, r)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		slices.Sort(out)
		return out, nil
	}
	ctxQuery := func(i int) (string, any) {
		return client.EndpointContext, client.ContextRequest{Session: session, Query: queries[i%len(queries)], BudgetChars: 10000}
	}
	recallQuery := func(i int) (string, any) {
		return client.EndpointRecall, client.RecallRequest{V: 1, Session: session, Query: queries[i%len(queries)], Limit: 10}
	}
	reg := prometheus.NewRegistry()
	publishOne := func() error {
		if next >= len(turns) {
			return errors.New("recall bench: out of generated turns")
		}
		b, _ := json.Marshal(turns[next])
		_, err := e.js.Publish(ctx, l.Subjects.In(session, events.KindTurn), b)
		next++
		return err
	}
	steps := []func() ([]time.Duration, error){
		func() ([]time.Duration, error) {
			return measure(200, nil, func(int) (string, any) {
				return client.EndpointContext, client.ContextRequest{Session: session, BudgetChars: 10000}
			})
		},
		func() ([]time.Duration, error) {
			first := true
			if f := os.Getenv("CONT_PROF"); f != "" {
				pf, _ := os.Create(f)
				_ = pprof.StartCPUProfile(pf)
				defer pprof.StopCPUProfile()
			}
			return measure(200, func() error {
				if first { // the index is built by a request not measured
					first = false
					_, err := ask(ctxQuery(0))
					return err
				}
				return nil
			}, ctxQuery, service.Registerer(reg))
		},
		func() ([]time.Duration, error) { return measure(150, publishOne, ctxQuery) },
		// Cold: built from the stream for every request (a budget below
		// one session keeps nothing, and nothing is stored).
		func() ([]time.Duration, error) {
			return measure(20, nil, ctxQuery, service.IndexBytes(1), service.IndexStoreBytes(0))
		},
		// First after a restart: a new instance each time, which loads
		// the index the earlier instances stored into memory at start
		// (timed apart), then its first request.
		func() ([]time.Duration, error) {
			var out, took []time.Duration
			for i := range 20 {
				ireg := prometheus.NewRegistry()
				started := time.Now()
				d, err := measure(1, func() error {
					for {
						m, err := gauges(ireg)
						if err != nil || m["foldstream_recall_index_preloading"] == 0 {
							took = append(took, time.Since(started))
							return err
						}
						time.Sleep(time.Millisecond)
					}
				}, func(int) (string, any) { return ctxQuery(i) }, service.Registerer(ireg))
				if err != nil {
					return nil, err
				}
				out = append(out, d...)
			}
			slices.Sort(out)
			slices.Sort(took)
			res.preload = ms(quantile(took, 0.5))
			return out, nil
		},
		// Loaded from the store at each request: a budget below one
		// session keeps nothing in memory (as after an eviction).
		func() ([]time.Duration, error) { return measure(20, nil, ctxQuery, service.IndexBytes(1)) },
		func() ([]time.Duration, error) { return measure(200, nil, recallQuery) },
		func() ([]time.Duration, error) { return measure(20, nil, recallQuery, service.IndexBytes(0)) },
		func() ([]time.Duration, error) { return measure(20, nil, ctxQuery, service.IndexBytes(0)) },
	}
	for _, step := range steps {
		lat, err := step()
		if err != nil {
			return res, err
		}
		res.lat = append(res.lat, lat)
	}
	mfs, err := reg.Gather()
	if err != nil {
		return res, err
	}
	for _, mf := range mfs {
		if mf.GetName() == "foldstream_recall_index_bytes" && len(mf.GetMetric()) > 0 {
			res.indexBytes = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return res, nil
}

// recallQueries are k questions over the generated vocabulary, from one
// to five content words.
func recallQueries(k int) []string {
	rng := rand.New(rand.NewPCG(3, 4))
	words := recallWords()
	out := make([]string, k)
	for i := range out {
		q := []string{"What", "did", "they", "say", "about"}
		for range 1 + rng.IntN(5) {
			q = append(q, words[rng.IntN(len(words))])
		}
		out[i] = strings.Join(q, " ") + "?"
	}
	return out
}
