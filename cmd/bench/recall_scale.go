package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// recallScale measures the question-aware context on many active
// sessions: sessions of turns each (1,000 of 5,000 by default, about ten
// times the index the default memory budget holds), all folded by the
// processor and each asked once before (so each has its index stored, as
// an active session has), then a new service instance asked at random
// sessions with the default budget: most requests miss the memory and
// load the session's index from the store. Printed beside it: the
// index's memory, the hit rate, and the same requests to an instance
// without the store (every miss builds from the stream).
func recallScale(ctx context.Context, w io.Writer, sessions, turns int) error {
	label := fmt.Sprintf("%s active sessions of %s turns", short(sessions), short(turns))
	e, err := newEnv(false)
	if err != nil {
		return err
	}
	defer e.close()
	l, kv, err := e.provision(ctx, "fold")
	if err != nil {
		return err
	}
	store := state.NewStore(e.js, kv)
	p, err := processor.New(processor.Config{MaxConcurrentFolds: 32}, processor.Deps{
		JS: e.js, Layout: l, Store: store, Summarizer: instant{}, Log: benchLog(),
	})
	if err != nil {
		return err
	}
	pctx, stopProcessor := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() {
		stopProcessor()
		<-done
	}()

	// Publish turn i of every session, then turn i+1: the sessions are
	// active together.
	began := time.Now()
	names := make([]string, sessions)
	rngs := make([]*rand.Rand, sessions)
	zipfs := make([]*rand.Zipf, sessions)
	words := recallWords()
	for s := range names {
		names[s] = fmt.Sprintf("active-%04d", s)
		rngs[s] = rand.New(rand.NewPCG(uint64(s), 7))
		zipfs[s] = rand.NewZipf(rngs[s], 1.1, 2, uint64(len(words)-1))
	}
	speakers := []string{"Alice", "Bob", "Carol", "Dave"}
	base := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	const batch = 50000
	subs, data := make([]string, 0, batch), make([][]byte, 0, batch)
	flush := func() error {
		err := publishAll(ctx, e.js, subs, data)
		subs, data = subs[:0], data[:0]
		return err
	}
	for i := range turns {
		for s, name := range names {
			ws := make([]string, 6+rngs[s].IntN(25))
			for j := range ws {
				ws[j] = words[zipfs[s].Uint64()]
			}
			b, _ := json.Marshal(events.Turn{V: 1, Session: name, TurnID: fmt.Sprintf("t%05d", i), At: base.Add(time.Duration(i) * 5 * time.Second),
				Speaker: speakers[i%len(speakers)], Role: "user", Kind: "speech", Text: strings.Join(ws, " ") + "."})
			subs = append(subs, l.Subjects.In(name, events.KindTurn))
			data = append(data, b)
			if len(subs) == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	published := time.Since(began)
	for s := 0; s < sessions; {
		cp, _, err := store.Load(ctx, names[s])
		if err != nil {
			return err
		}
		if cp.Total == int64(turns) && cp.Lease == nil {
			s++
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	applied := time.Since(began)

	bnc, _, err := connect(e.ns, "bench-builder")
	if err != nil {
		return err
	}
	defer bnc.Close()
	queries := recallQueries(40)
	ask := func(session string, i int) (time.Duration, error) {
		body, _ := json.Marshal(client.ContextRequest{Session: session, Query: queries[i%len(queries)], BudgetChars: 10000})
		start := time.Now()
		m, err := bnc.RequestWithContext(ctx, client.ServiceSubject("fold", client.EndpointContext), body)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
			return 0, fmt.Errorf("context: %s %s", code, m.Header.Get(micro.ErrorHeader))
		}
		return took, nil
	}
	// run asks k questions of random sessions of an instance started
	// with opts, and returns the sorted latencies and its index metrics.
	run := func(k int, pick func(i int) int, settle func(*prometheus.Registry) error, opts ...service.Option) ([]time.Duration, map[string]float64, error) {
		reg := prometheus.NewRegistry()
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		svc, err := service.Start(sctx, e.nc, e.js, l, store, nil, benchLog(), append(opts, service.Registerer(reg))...)
		if err != nil {
			return nil, nil, err
		}
		defer func() { _ = svc.Stop() }()
		var lat []time.Duration
		for i := range k {
			d, err := ask(names[pick(i)], i)
			if err != nil {
				return nil, nil, err
			}
			lat = append(lat, d)
		}
		if settle != nil {
			if err := settle(reg); err != nil {
				return nil, nil, err
			}
		}
		slices.Sort(lat)
		m, err := gauges(reg)
		return lat, m, err
	}
	// Every session asked once: its index built and stored.
	_, _, err = run(sessions, func(i int) int { return i }, func(reg *prometheus.Registry) error {
		for {
			m, err := gauges(reg)
			if err != nil || m["foldstream_recall_index_stores_total"] >= float64(sessions) {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	if err != nil {
		return err
	}
	prepared := time.Since(began)
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(int) int { return rng.IntN(sessions) }
	const k, kRef = 2000, 100
	lat, m, err := run(k, random, nil)
	if err != nil {
		return err
	}
	ref, mRef, err := run(kRef, random, nil, service.IndexStoreBytes(0))
	if err != nil {
		return err
	}
	hit := func(m map[string]float64, k int) float64 {
		return 100 * (1 - (m["foldstream_recall_index_loads_total"]+m["foldstream_recall_index_builds_total"])/float64(k))
	}
	fmt.Fprintf(w, "  %-60s p50 %.2f  p99 %.2f (target p99 <= 10 ms); index in memory %.0f MiB (budget %.0f), %0.f sessions, hit rate %.1f%%, %.0f loaded from the store, %.0f built; %d requests\n",
		label+", context with query at a random one", ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)),
		m["foldstream_recall_index_bytes"]/(1<<20), m["foldstream_recall_index_budget_bytes"]/(1<<20), m["foldstream_recall_index_sessions"],
		hit(m, k), m["foldstream_recall_index_loads_total"], m["foldstream_recall_index_builds_total"], k)
	fmt.Fprintf(w, "  %-60s p50 %.2f  p99 %.2f; hit rate %.1f%%, %.0f built; %d requests\n",
		label+", the same without the store", ms(quantile(ref, 0.5)), ms(quantile(ref, 0.99)), hit(mRef, kRef), mRef["foldstream_recall_index_builds_total"], kRef)
	fmt.Fprintf(w, "  %-60s published %s, applied and folded %s, every session asked once (index stored) %s\n", label+", set-up",
		published.Round(time.Second), applied.Round(time.Second), prepared.Round(time.Second))
	return nil
}

// gauges are the registry's gauge and counter values by name.
func gauges(reg *prometheus.Registry) (map[string]float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[mf.GetName()] += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[mf.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// short is n as 1k, 5k, 10k, or as is.
func short(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
