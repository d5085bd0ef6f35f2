package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// recallScale measures the question-aware context on many active
// sessions: sessions of turns each (1,000 of 5,000 by default, about ten
// times the index the default memory budget holds), then a new service
// instance asked at random sessions with the default budget: most
// requests find the session's index packed in memory (the rest load it
// from the store). Printed beside it: the index's memory, the hit rate,
// the misses' and the hits' latencies, and kRef requests to an instance without the
// store (every miss builds from the stream). The measured instance is
// timed after one untimed request to each session, in random order.
//
// The set-up is what a deployment holds after those turns, reached the
// fast way: the turns are published in large async batches, then the
// processor applies them with folds amortized (min_fold_tokens 4000: a
// fold of ~200 turns instead of 500 folds of 10 per session, the same
// checkpoints and summaries otherwise), then service.SeedIndexes builds
// every session's index from the stream and stores it, as an active
// session's is, reading the whole stream once per 256 sessions. With
// -recall-scale-dir the store is kept, and a later run reuses the turns
// and the indexes still current.
func recallScale(ctx context.Context, w io.Writer, sessions, turns int, budget int64, kRef int, dir string, memory bool, cpuProfile io.Writer) error {
	label := fmt.Sprintf("%s active sessions of %s turns", short(sessions), short(turns))
	e, err := openEnv(dir)
	if err != nil {
		return err
	}
	defer e.close()
	l, store, err := e.foldStore(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	names := make([]string, sessions)
	for s := range names {
		names[s] = fmt.Sprintf("active-%04d", s)
	}
	// A kept store already holds the turns (or some of them applied).
	st, err := e.js.Stream(ctx, l.In)
	if err != nil {
		return err
	}
	var published time.Duration
	switch stored := st.CachedInfo().State.Msgs; stored {
	case 0:
		if err := publishScale(ctx, e, l, names, turns); err != nil {
			return err
		}
		published = time.Since(began)
		progress("%s: %d turns published in %s", label, sessions*turns, published.Round(time.Millisecond))
	case uint64(sessions * turns):
		progress("%s: %d turns stored in %s already", label, stored, e.dir)
	default:
		return fmt.Errorf("-recall-scale-dir %s: stream %s holds %d events, expected none or %d (another -recall-sessions or -recall-session-turns?)", e.dir, l.In, stored, sessions*turns)
	}
	if err := applyScale(ctx, e, l, store, names, turns); err != nil {
		return err
	}
	applied := time.Since(began)
	progress("%s: applied and folded at %s", label, applied.Round(time.Millisecond))
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
	// with opts, once it has preloaded what it preloads at start and
	// was asked the warm sessions once each; with profile, the k
	// requests alone are profiled.
	run := func(k int, warm []int, pick func(i int) int, profile io.Writer, opts ...service.Option) (scaleRun, error) {
		var r scaleRun
		reg := prometheus.NewRegistry()
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		svc, err := service.Start(sctx, e.nc, e.js, l, store, nil, benchLog(), append(opts, service.Registerer(reg))...)
		if err != nil {
			return r, err
		}
		defer func() { _ = svc.Stop() }()
		for {
			if r.m, err = gauges(reg); err != nil || r.m["foldstream_recall_index_preloading"] == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// A request missed the memory if it loaded or built the index.
		misses := func() float64 {
			return r.m["foldstream_recall_index_loads_total"] + r.m["foldstream_recall_index_builds_total"]
		}
		// Untimed requests first, one to every active session: the
		// instance holds what it holds after serving them for a while,
		// and the process's heap reaches the size it keeps while
		// serving, as a running deployment's has (a page the heap grows
		// into costs a fault on first touch, ~15 µs on a VM: ~1.5 ms per
		// index loaded while it grows).
		for i, s := range warm {
			if _, err := ask(names[s], k+i); err != nil {
				r.failed++
			}
		}
		if r.m, err = gauges(reg); err != nil {
			return r, err
		}
		before, unpacked := misses(), r.m["foldstream_recall_index_unpacked_total"]
		if profile != nil {
			if err := pprof.StartCPUProfile(profile); err != nil {
				return r, err
			}
			defer pprof.StopCPUProfile()
		}
		for i := range k {
			d, err := ask(names[pick(i)], i)
			if err != nil {
				// A build from a long interleaved stream may exceed the
				// request timeout: counted, not measured.
				r.failed++
				continue
			}
			r.all = append(r.all, d)
			if r.m, err = gauges(reg); err != nil {
				return r, err
			}
			if after := misses(); after > before {
				r.missed = append(r.missed, d)
			} else {
				r.hits = append(r.hits, d)
			}
			before = misses()
		}
		slices.Sort(r.all)
		slices.Sort(r.missed)
		slices.Sort(r.hits)
		r.m, err = gauges(reg)
		r.unpacked = int(r.m["foldstream_recall_index_unpacked_total"] - unpacked)
		return r, err
	}

	// Every session's index stored, as an active session's is: built
	// from the stream by the service's own code and written to the store
	// in one pass per group of sessions (asking each once would read the
	// interleaved stream once per session).
	seeded, err := service.SeedIndexes(ctx, e.js, l, store, names, benchLog())
	if err != nil {
		return err
	}
	prepared := time.Since(began)
	progress("%s: %d indexes stored at %s", label, seeded, prepared.Round(time.Millisecond))

	opts := []service.Option{service.IndexBytes(cmp.Or(budget, service.DefaultIndexBytes))}
	where := "file bucket, its blocks read from disk since the server started"
	if memory {
		copied, err := copyToMemory(ctx, e, l)
		if err != nil {
			return err
		}
		progress("%s: %d entries copied to the memory bucket", label, copied)
		opts = append(opts, service.IndexStoreInMemory(true))
		where = "memory bucket"
	}

	rng := rand.New(rand.NewPCG(5, 6))
	random := func(int) int { return rng.IntN(sessions) }
	const k = 1000
	got, err := run(k, rng.Perm(sessions), random, cpuProfile, opts...)
	if err != nil {
		return err
	}
	var ref scaleRun
	if kRef > 0 {
		if ref, err = run(kRef, nil, random, nil, service.IndexStoreBytes(0)); err != nil {
			return err
		}
	}
	m := got.m
	fmt.Fprintf(w, "  %-60s p50 %.2f  p99 %.2f (target p99 <= 10 ms); index in memory %.0f MiB (budget %.0f), %.0f sessions (%.0f of them packed), hit rate %.1f%% (%d loaded from the store, %s; %.0f built), %.0f preloaded at start; %d requests%s\n",
		label+", context with query at a random one", ms(quantile(got.all, 0.5)), ms(quantile(got.all, 0.99)),
		m["foldstream_recall_index_bytes"]/(1<<20), m["foldstream_recall_index_budget_bytes"]/(1<<20), m["foldstream_recall_index_sessions"],
		m["foldstream_recall_index_packed_sessions"], got.hitRate(), len(got.missed), where, m["foldstream_recall_index_builds_total"],
		m["foldstream_recall_index_preloaded_total"], len(got.all), got.failedNote())
	fmt.Fprintf(w, "  %-60s p50 %.2f  p99 %.2f; %d requests\n",
		label+", of which the misses (index loaded)", ms(quantile(got.missed, 0.5)), ms(quantile(got.missed, 0.99)), len(got.missed))
	fmt.Fprintf(w, "  %-60s p50 %.2f  p99 %.2f; %d requests, %d of them to a packed index\n",
		label+", of which the hits (index in memory)", ms(quantile(got.hits, 0.5)), ms(quantile(got.hits, 0.99)), len(got.hits), got.unpacked)
	if kRef > 0 {
		fmt.Fprintf(w, "  %-60s p50 %.2f  p99 %.2f; hit rate %.1f%%, %.0f built; %d requests%s\n",
			label+", the same without the store", ms(quantile(ref.all, 0.5)), ms(quantile(ref.all, 0.99)), ref.hitRate(),
			ref.m["foldstream_recall_index_builds_total"], len(ref.all), ref.failedNote())
	}
	setUp := fmt.Sprintf("turns reused from %s, applied and folded %s", e.dir, applied.Round(time.Second))
	if published > 0 {
		setUp = fmt.Sprintf("published %s, applied and folded %s", published.Round(time.Second), applied.Round(time.Second))
	}
	fmt.Fprintf(w, "  %-60s %s, %d indexes stored (%d current already) %s; total %s\n", label+", set-up",
		setUp, seeded, sessions-seeded, (prepared - applied).Round(time.Second), prepared.Round(time.Second))
	return nil
}

// publishScale publishes turns turns to each of names, turn i of every
// session then turn i+1 (the sessions are active together), in batches
// of 50,000 async publishes.
func publishScale(ctx context.Context, e *env, l broker.Layout, names []string, turns int) error {
	sessions := len(names)
	rngs := make([]*rand.Rand, sessions)
	zipfs := make([]*rand.Zipf, sessions)
	words := recallWords()
	for s := range names {
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
	var sb strings.Builder
	for i := range turns {
		for s, name := range names {
			sb.Reset()
			for j := range 6 + rngs[s].IntN(25) {
				if j > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(words[zipfs[s].Uint64()])
			}
			sb.WriteByte('.')
			b, _ := json.Marshal(events.Turn{V: 1, Session: name, TurnID: fmt.Sprintf("t%05d", i), At: base.Add(time.Duration(i) * 5 * time.Second),
				Speaker: speakers[i%len(speakers)], Role: "user", Kind: "speech", Text: sb.String()})
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
	return nil
}

// applyScale runs the processor until it applied and folded every turn
// of names, and stops it: the requests are then the service's alone.
// On a kept store it resumes where an earlier run stopped.
func applyScale(ctx context.Context, e *env, l broker.Layout, store *state.Store, names []string, turns int) error {
	sessions := len(names)
	// Few folds at once, each with all the time it needs: a fold reads
	// its batch's events back from the stream, where a thousand sessions
	// interleave, and on a busy machine 32 at once outlived the fold
	// timeout, expired their leases and were folded again, without end.
	stopProcessor, err := runProcessor(ctx, e, l, store, processor.Config{MaxConcurrentFolds: 4, FoldTimeout: 10 * time.Minute,
		Window: fold.Window{Recent: 50, Batch: 10, MaxSummaryChars: 1200, MaxNoteChars: 400, MinFoldTokens: 4000}})
	if err != nil {
		return err
	}
	info, err := e.js.Stream(ctx, l.In)
	if err != nil {
		stopProcessor()
		return err
	}
	err = waitAcked(ctx, e.js, l.In, info.CachedInfo().State.LastSeq)
	for s := 0; err == nil && s < sessions; {
		var cp *state.Session
		if cp, _, err = store.Load(ctx, names[s]); err != nil {
			break
		}
		if cp.Total == int64(turns) && cp.Lease == nil {
			s++
			continue
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if perr := stopProcessor(); err == nil {
		err = perr
	}
	return err
}

// scaleRun is one instance's requests of the scale line.
type scaleRun struct {
	all, missed, hits []time.Duration // sorted; missed: the requests that loaded or built the index, hits the others
	failed            int             // requests that failed (timed out)
	unpacked          int             // hits that decoded a packed index
	m                 map[string]float64
}

func (r scaleRun) hitRate() float64 {
	return 100 * (1 - float64(len(r.missed))/float64(max(1, len(r.all))))
}

func (r scaleRun) failedNote() string {
	if r.failed == 0 {
		return ""
	}
	return fmt.Sprintf(", %d more failed (timed out)", r.failed)
}

// progress tells the set-up's phases on stderr under
// FOLDSTREAM_BENCH_DEBUG=1.
func progress(format string, args ...any) {
	if os.Getenv("FOLDSTREAM_BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
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

// copyToMemory fills the memory bucket the service uses with
// service.IndexStoreInMemory (<BASE>_RECALL_MEM) with the entries of the
// file bucket (<BASE>_RECALL), as the service would have written them
// there, and returns how many keys it copied.
func copyToMemory(ctx context.Context, e *env, l broker.Layout) (int, error) {
	base := strings.TrimSuffix(l.Bucket, "_SESSIONS") + "_RECALL"
	src, err := e.js.KeyValue(ctx, base)
	if err != nil {
		return 0, fmt.Errorf("recall index store %s: %w", base, err)
	}
	dst, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: base + "_MEM", History: 1,
		MaxBytes: service.DefaultIndexStoreBytes, Storage: jetstream.MemoryStorage})
	if err != nil {
		return 0, err
	}
	keys, err := src.ListKeys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for k := range keys.Keys() {
		v, err := src.Get(ctx, k)
		if err != nil {
			return n, err
		}
		if _, err := dst.Put(ctx, k, v.Value()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
