package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"syscall"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// benchLog is silent unless FOLDSTREAM_BENCH_LOG names a level (e.g.
// "warn"): then the processor's logs go to stderr.
func benchLog() zerolog.Logger {
	lvl, err := zerolog.ParseLevel(os.Getenv("FOLDSTREAM_BENCH_LOG"))
	if err != nil || os.Getenv("FOLDSTREAM_BENCH_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
}

// env is a nats-server with file storage in a temporary directory
// (removed when it closes) or in one the bench keeps (openEnv).
type env struct {
	ns   *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	dir  string
	temp bool
}

// newEnv starts a server; listen makes it reachable over TCP for a child
// process.
func newEnv(listen bool) (*env, error) {
	dir, err := os.MkdirTemp("", "foldstream-bench-")
	if err != nil {
		return nil, err
	}
	e, err := startEnv(dir, listen)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e.temp = true
	return e, nil
}

// openEnv starts a server on dir's store, kept when it closes (created
// if needed); without dir, on a temporary one (newEnv).
func openEnv(dir string) (*env, error) {
	if dir == "" {
		return newEnv(false)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startEnv(dir, false)
}

func startEnv(dir string, listen bool) (*env, error) {
	ns, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1, NoListen: !listen})
	if err != nil {
		return nil, err
	}
	nc, js, err := connect(ns, "bench")
	if err != nil {
		ns.Shutdown()
		return nil, err
	}
	return &env{ns: ns, nc: nc, js: js, dir: dir}, nil
}

// connect opens one in-process client connection to ns.
func connect(ns *server.Server, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := broker.Connect(broker.ConnConfig{Name: name}, ns, zerolog.Nop())
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func (e *env) close() {
	e.nc.Close()
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	if e.temp {
		os.RemoveAll(e.dir)
	}
}

// provision creates foldstream's streams and bucket under prefix.
func (e *env) provision(ctx context.Context, prefix string) (broker.Layout, jetstream.KeyValue, error) {
	subjects, err := events.NewSubjects(prefix)
	if err != nil {
		return broker.Layout{}, nil, err
	}
	l := broker.NewLayout(subjects)
	kv, err := broker.Provision(ctx, e.js, l, broker.ProvisionConfig{}, zerolog.Nop())
	return l, kv, err
}

const benchText = "Let's try the new team comp on Tokyo tonight; Bob keeps dying as Hulk so maybe Jeff the land shark instead?"

// payloads returns n realistic turn payloads (~230 bytes) spread over
// sessions, with their subjects. Varied, each session's turns say the
// lines of benchLines in turn (sessions start at different lines);
// otherwise every turn is Alice saying benchText. In lock-step (round-robin) every session
// reaches each fold threshold within the same round of turns; staggered,
// each session starts at its own point of a 10-turn fold cycle, as
// independent bots do, so folds come evenly instead of in bursts.
func payloads(subjects events.Subjects, n, sessions int, staggered, varied bool) ([]string, [][]byte) {
	type pos struct{ session, turn int }
	order := make([]pos, n)
	for i := range n {
		order[i] = pos{i % sessions, i / sessions}
	}
	if staggered {
		// Deterministic phases in [0, 10) turns, spread over the sessions.
		phase := func(s int) float64 { return float64((s*7919)%1000) / 100 }
		slices.SortStableFunc(order, func(a, b pos) int {
			return cmp.Compare(float64(a.turn)+phase(a.session), float64(b.turn)+phase(b.session))
		})
	}
	subs := make([]string, n)
	data := make([][]byte, n)
	// One second apart, ending now: the processor rejects an at more than
	// --max-clock-skew ahead of when the stream stored the turn.
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Duration(n) * time.Second)
	for j, o := range order {
		s := fmt.Sprintf("sess-%05d", o.session)
		t := events.Turn{V: 1, Session: s, TurnID: fmt.Sprintf("%s-%d", s, o.turn),
			At:      base.Add(time.Duration(o.turn*sessions+o.session) * time.Second),
			Speaker: "Alice", Role: "user", Text: benchText}
		if varied {
			l := benchLines[(o.session*7+o.turn)%len(benchLines)]
			t.Speaker, t.Text = l[0], l[1]
		}
		data[j], _ = json.Marshal(t)
		subs[j] = subjects.In(s, events.KindTurn)
	}
	return subs, data
}

func publishAll(ctx context.Context, js jetstream.JetStream, subs []string, data [][]byte) error {
	for i := 0; i < len(subs); {
		if _, err := js.PublishAsync(subs[i], data[i]); err != nil {
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return err
			}
			// The server is slower than the publisher (shared cores): let
			// the window drain, then go on.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		i++
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acked reports whether the stream has consumers and every one of them has
// nothing left to deliver and nothing waiting for an ack, with the ack
// floor at last or beyond. It does not depend on the processor's consumer
// names (one consumer, or one per partition).
func acked(ctx context.Context, js jetstream.JetStream, stream string, last uint64) (bool, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return false, err
	}
	lister := st.ListConsumers(ctx)
	n, floor := 0, uint64(0)
	for info := range lister.Info() {
		n++
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return false, nil
		}
		floor = max(floor, info.AckFloor.Stream)
	}
	if err := lister.Err(); err != nil {
		return false, err
	}
	return n > 0 && floor >= last, nil
}

// waitAcked polls acked until it holds.
func waitAcked(ctx context.Context, js jetstream.JetStream, stream string, last uint64) error {
	for {
		ok, err := acked(ctx, js, stream, last)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// rawRate is the reference: a durable pull consumer that only acks, with
// the same pull batch as the processor.
// It returns msgs/s and the process CPU time (server and client, both in
// this process) per message.
func rawRate(ctx context.Context, n, sessions int, repeated bool) (float64, time.Duration, error) {
	e, err := newEnv(false)
	if err != nil {
		return 0, 0, err
	}
	defer e.close()
	l, _, err := e.provision(ctx, "raw")
	if err != nil {
		return 0, 0, err
	}
	subs, data := payloads(l.Subjects, n, sessions, false, !repeated)
	if err := publishAll(ctx, e.js, subs, data); err != nil {
		return 0, 0, err
	}
	// A delivery lost in flight (a pull replaced after a missed heartbeat)
	// comes back only after AckWait: at the default 30 s one such loss made
	// a run ~70x slower (3.3k msg/s). The processor notices a loss within
	// seconds (its stall watch); a 1 s AckWait keeps the reference as
	// quick to recover, and 2048 pulled messages are acked well within it.
	cons, err := e.js.CreateOrUpdateConsumer(ctx, l.In, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 65536, AckWait: time.Second})
	if err != nil {
		return 0, 0, err
	}
	start, cpu0 := time.Now(), cpuTime()
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return 0, 0, err
	}
	for got := 0; got < n; {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return 0, 0, err
			}
			continue // e.g. a missed heartbeat under load: the processor retries too
		}
		_ = m.Ack()
		got++
	}
	it.Stop()
	if err := waitAcked(ctx, e.js, l.In, uint64(n)); err != nil {
		return 0, 0, err
	}
	return float64(n) / time.Since(start).Seconds(), (cpuTime() - cpu0) / time.Duration(n), nil
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRun configures one in-process processor run.
type procRun struct {
	n, sessions int
	summarizer  string
	flush       time.Duration
	window      fold.Window // zero: the default
	// foldingOff: folds are due only on generate controls, which the
	// bench never sends: what is left is the per-turn path.
	foldingOff bool
	observe    func(processor.FoldTiming)
	called     func(session string, from int64) // instant summarizer: each call
	profile    io.Writer
	memProfile string // allocations during the timed part: this file, with the start in <file>.base (pprof -base)
	// probe: meanwhile, time single publishes to the outbound stream from
	// a connection of their own (the floor of any fold's publish).
	probe bool
	// staggered: sessions at their own points of the fold cycle (payloads).
	staggered bool
	repeated  bool // every turn says benchText (payloads)
}

type procResult struct {
	rate    float64
	cpu     time.Duration // process CPU time per turn while timed
	applied uint64
	folds   uint64 // landed while ingest was timed
	took    time.Duration
	probes  []time.Duration // round trips of the probe's publishes
}

// processorRate times the processor from consumer attach until every turn
// is applied, checkpointed and acked. Folds run but ingest does not wait
// for them.
func processorRate(ctx context.Context, r procRun) (procResult, error) {
	var res procResult
	e, err := newEnv(false)
	if err != nil {
		return res, err
	}
	defer e.close()
	l, kv, err := e.provision(ctx, "fold")
	if err != nil {
		return res, err
	}
	subs, data := payloads(l.Subjects, r.n, r.sessions, r.staggered, !r.repeated)
	if err := publishAll(ctx, e.js, subs, data); err != nil {
		return res, err
	}
	sum, maxFolds, closeSum, err := newSummarizer(r.summarizer)
	if err != nil {
		return res, err
	}
	if r.called != nil {
		sum = instant{called: r.called}
	}
	defer closeSum()
	// The fold path's own connection, as cmd/processor opens it.
	fnc, fjs, err := connect(e.ns, "bench-folds")
	if err != nil {
		return res, err
	}
	defer fnc.Close()
	trigger := processor.TriggerTurn
	if r.foldingOff {
		trigger = processor.TriggerGenerate
	}
	p, err := processor.New(processor.Config{FlushInterval: r.flush, MaxConcurrentFolds: maxFolds, Window: r.window, Trigger: trigger}, processor.Deps{
		JS: e.js, FoldJS: fjs, Layout: l, Store: state.NewStore(e.js, kv), Summarizer: sum, Log: benchLog(),
	})
	if err != nil {
		return res, err
	}
	if r.observe != nil {
		p.ObserveFolds(r.observe)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		return res, fmt.Errorf("processor stopped before it was ready: %v", err)
	}
	if r.profile != nil {
		_ = pprof.StartCPUProfile(r.profile)
	}
	if r.memProfile != "" {
		writeAllocs(r.memProfile + ".base")
	}
	if tf := os.Getenv("FOLDSTREAM_BENCH_TRACE"); tf != "" {
		f, _ := os.Create(tf)
		_ = trace.Start(f)
		defer trace.Stop()
	}
	start, cpu0 := time.Now(), cpuTime() // like the reference: timed from an attached consumer
	probed := make(chan []time.Duration, 1)
	pctx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	if r.probe {
		pnc, pjs, err := connect(e.ns, "bench-probe")
		if err != nil {
			return res, err
		}
		defer pnc.Close()
		go func() { probed <- probe(pctx, pjs, l.Subjects.Out("bench-probe", events.KindEvent)) }()
	}
	debug := os.Getenv("FOLDSTREAM_BENCH_DEBUG") != ""
	var written *writeTally
	if debug {
		if written, err = tallyWrites(e.nc, l); err != nil {
			return res, err
		}
	}
	appliedAt := make(chan time.Duration, 1)
	if debug { // its polling costs a little CPU: only when asked for
		go func() {
			for p.Applied() < uint64(r.n) && rctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			appliedAt <- time.Since(start)
		}()
	}
	err = waitAcked(ctx, e.js, l.In, uint64(r.n))
	if debug {
		fmt.Fprintf(os.Stderr, "all applied at %v, all acked at %v\n", <-appliedAt, time.Since(start))
		// What the processor stored meanwhile: checkpoint (and due mark)
		// writes, and outbound publishes (summaries and lifecycle events).
		for _, name := range []string{"KV_" + l.Bucket, l.Out} {
			if st, err := e.js.Stream(ctx, name); err == nil {
				fmt.Fprintf(os.Stderr, "  %s: %d messages stored\n", name, st.CachedInfo().State.LastSeq)
			}
		}
		written.print(os.Stderr, 0)
	}
	res.took = time.Since(start)
	res.cpu = (cpuTime() - cpu0) / time.Duration(r.n)
	if debug {
		fmt.Fprintf(os.Stderr, "  process CPU per turn: %v\n", res.cpu)
	}
	if r.probe {
		stopProbe()
		res.probes = <-probed
	}
	// With FOLDSTREAM_BENCH_DEBUG the profiles also cover the folds that
	// land after ingest (below), so that they hold every fold's work.
	stopProfiles := func() {
		if r.profile != nil {
			pprof.StopCPUProfile()
		}
		if r.memProfile != "" {
			writeAllocs(r.memProfile)
		}
	}
	if !debug || err != nil {
		stopProfiles()
	}
	if err != nil {
		return res, err
	}
	res.folds = p.Folds() // landed while ingest ran: their work shares the cores
	if debug {
		// Every fold's work, wherever it fell: the CPU per turn once the
		// folds stop landing (none for 1 s: on a loaded machine a fold
		// path can pause for longer than 300 ms), which does not depend on
		// how many landed while ingest was timed.
		for last := res.folds; ; {
			time.Sleep(time.Second)
			n := p.Folds()
			if n == last {
				break
			}
			last = n
		}
		fmt.Fprintf(os.Stderr, "  process CPU per turn, every fold landed: %v (%d folds)\n", (cpuTime()-cpu0)/time.Duration(r.n), p.Folds())
		stopProfiles()
		fmt.Fprintln(os.Stderr, "  what the processor wrote once every fold landed:")
		written.print(os.Stderr, p.Folds())
	}
	res.rate = float64(r.n) / res.took.Seconds()
	cancel()
	if err := <-done; err != nil {
		return res, err
	}
	res.applied = p.Applied()
	if res.applied != uint64(r.n) {
		return res, fmt.Errorf("processor applied %d of %d turns", res.applied, r.n)
	}
	return res, nil
}

// probe publishes one small message every 2 ms and waits for its ack,
// until ctx ends, and returns the round trips: what storing one message
// on the outbound stream costs under the load of the moment.
func probe(ctx context.Context, js jetstream.JetStream, subject string) []time.Duration {
	var rtts []time.Duration
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return rtts
		case <-tick.C:
		}
		t := time.Now()
		if _, err := js.Publish(ctx, subject, []byte(`{"probe":true}`)); err != nil {
			return rtts
		}
		rtts = append(rtts, time.Since(t))
	}
}

// instant answers at once with a fixed summary: what is left of a fold's
// cost is foldstream's own.
type instant struct {
	called func(session string, from int64)
}

func (instant) Name() string { return "instant" }
func (i instant) Summarize(_ context.Context, req fold.Request) (fold.Result, error) {
	if i.called != nil && len(req.Turns) > 0 {
		i.called(req.Session, req.Turns[0].Index)
	}
	return fold.Result{Summary: "Alice and Bob planned the Tokyo match; Bob keeps dying as Hulk, so Jeff the land shark is next.", Model: "instant"}, nil
}

// sized answers at once with what the offline summarizer returned for a
// session's fifth fold of the bench's varied text (its summary, state and
// memories): what those outputs cost foldstream and the server, without
// the summarizer's own CPU. Each fold's memories name its session and
// turns, so that none is dropped as published before.
type sized struct {
	out fold.Result
}

// newSized runs the offline summarizer over the first five folds of one
// session of the ingest section and keeps the last fold's outputs.
func newSized() (sized, error) {
	s, w := offline.New(), fold.DefaultWindow()
	base := time.Now().UTC().Truncate(time.Second)
	var prev fold.Outcome
	for k := range 5 {
		turns := make([]fold.Turn, w.Batch)
		for i := range turns {
			t := k*w.Batch + i
			l := benchLines[(3*7+t)%len(benchLines)]
			turns[i] = fold.Turn{Index: int64(t), At: base.Add(time.Duration(t) * time.Second), Speaker: l[0], Role: "user", Text: l[1]}
		}
		out, err := fold.Summarize(context.Background(), s, fold.Request{Session: "sess-00003", Profile: fold.ProfileVoice, Turns: turns,
			MaxChars: w.MaxSummaryChars, From: turns[0].At, To: turns[len(turns)-1].At, PreviousSummary: prev.Summary, PreviousState: prev.State})
		if err != nil {
			return sized{}, fmt.Errorf("-summarizer instant-sized: %w", err)
		}
		prev = out
	}
	return sized{out: fold.Result{Summary: prev.Summary, State: prev.State, Memories: prev.Memories, Model: "instant-sized"}}, nil
}

func (sized) Name() string { return "instant-sized" }
func (z sized) Summarize(_ context.Context, req fold.Request) (fold.Result, error) {
	out := z.out
	out.State = bytes.Clone(out.State) // a fold's own, as the offline summarizer's is
	out.Memories = make([]string, len(z.out.Memories))
	for i, m := range z.out.Memories {
		out.Memories[i] = fmt.Sprintf("%s (%s, folded at %s)", m, req.Session, req.To.Format(time.RFC3339))
	}
	return out, nil
}

// newSummarizer builds a fold backend with the fold concurrency the
// processor command would use for it.
func newSummarizer(kind string) (fold.Summarizer, int, func(), error) {
	switch kind {
	case "offline":
		return offline.New(), max(1, runtime.NumCPU()/2), func() {}, nil
	case "instant":
		return instant{}, 32, func() {}, nil
	case "instant-sized":
		z, err := newSized()
		return z, 32, func() {}, err
	case "http":
		srv := openaitest.New(nil)
		srv.SetFallback(openaitest.OK("Alice and Bob planned the Tokyo match; Bob keeps dying as Hulk."))
		sum, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "bench", Model: "bench-mini"}, zerolog.Nop())
		if err != nil {
			srv.Close()
			return nil, 0, nil, err
		}
		return sum, 32, srv.Close, nil
	default:
		return nil, 0, nil, fmt.Errorf("-summarizer: expected offline, http, instant or instant-sized, got %q", kind)
	}
}

// writeAllocs writes the process's allocation profile so far to path
// (cumulative since start: the timed part is this file less its .base).
func writeAllocs(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -memprofile:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -memprofile:", err)
	}
}

// profiled is set once a processor run has been profiled (-cpuprofile).
var profiled bool

func ingestSection(ctx context.Context, w io.Writer, o opts) error {
	fmt.Fprintf(w, "ingest: processor turns/s over raw JetStream consume+ack msgs/s, same server; %d turns per run, summarizer %s\n", o.turns, o.summarizer)
	// The same ingest with a summarizer that answers at once: what the
	// ratio is when the model's work is done elsewhere, as with a remote
	// model, and the cores here run foldstream and NATS only.
	elsewhere := o.summarizer != "instant"
	fmt.Fprintf(w, "%-9s %-26s %-26s %-22s %-26s %-27s", "sessions", "raw consume+ack msg/s", "processor ingest turns/s", "ratio (target >= 0.5)", "CPU ratio raw/processor", "folds landed during ingest")
	// Offline: also a summarizer answering at once with the offline
	// summarizer's outputs (instant-sized): what its summary, state and
	// memories cost foldstream and the server without its CPU.
	withSized := o.summarizer == "offline"
	if elsewhere {
		fmt.Fprintf(w, " %-46s", "ratio, summarizer answering at once (instant)")
	}
	if withSized {
		fmt.Fprintf(w, " %-48s", "ratio, offline's outputs at once (instant-sized)")
	}
	fmt.Fprintf(w, " %s", "ratio, folding off (floor of the per-turn path)")
	fmt.Fprintln(w)
	for _, s := range o.sessions {
		var raws, procs, ratios, cpus, folds, instants, sizeds, unfolded []float64
		// Offline only: CPU per turn in µs of the processor (offline and
		// instant runs) and of the offline summarizer alone, and the
		// ceilings that the CPU allows (see docs/benchmarks.md, ingest).
		var procCPU, instCPU, sizedCPU, sumCPU, cpuCeil, ratioCeil, cpuCeilOut, ratioCeilOut []float64
		replayed := 0
		for range o.runs {
			raw, rawCPU, err := rawRate(ctx, o.turns, s, o.repeated)
			if err != nil {
				return fmt.Errorf("raw reference: %w", err)
			}
			pr := procRun{n: o.turns, sessions: s, summarizer: o.summarizer, flush: o.flushInterval, repeated: o.repeated}
			if (o.cpuProfile != nil || o.memProfile != "") && !profiled {
				pr.profile, pr.memProfile, profiled = o.cpuProfile, o.memProfile, true // one profile: the first processor run
			}
			res, err := processorRate(ctx, pr)
			if err != nil {
				return fmt.Errorf("processor: %w", err)
			}
			raws, procs, ratios = append(raws, raw), append(procs, res.rate), append(ratios, res.rate/raw)
			cpus = append(cpus, float64(rawCPU)/float64(res.cpu))
			folds = append(folds, float64(res.folds))
			cpuPerTurn := res.cpu
			var ci, cs, ri float64 // offline: the instant run's CPU per turn and ratio, the summarizer alone's
			if elsewhere {
				pr.summarizer, pr.profile, pr.memProfile = "instant", nil, ""
				res, err := processorRate(ctx, pr)
				if err != nil {
					return fmt.Errorf("processor, instant summarizer: %w", err)
				}
				instants = append(instants, res.rate/raw)
				if o.summarizer == "offline" {
					sum, n, err := offlineCPU(ctx, o.turns, s, int(folds[len(folds)-1]), o.repeated)
					if err != nil {
						return err
					}
					replayed = n
					ci, cs, ri = float64(res.cpu), float64(sum)/float64(o.turns), res.rate/raw
					procCPU, instCPU, sumCPU = append(procCPU, us(cpuPerTurn)), append(instCPU, us(res.cpu)), append(sumCPU, cs/1e3)
					cpuCeil = append(cpuCeil, float64(rawCPU)/(ci+cs))
					ratioCeil = append(ratioCeil, res.rate/raw*ci/(ci+cs))
				}
			}
			if withSized {
				pr.summarizer = "instant-sized"
				res, err := processorRate(ctx, pr)
				if err != nil {
					return fmt.Errorf("processor, instant-sized summarizer: %w", err)
				}
				sizeds, sizedCPU = append(sizeds, res.rate/raw), append(sizedCPU, us(res.cpu))
				// The same ceilings with the offline outputs' cost: the
				// instant-sized run's CPU per turn in place of the instant's.
				cz := float64(res.cpu)
				cpuCeilOut = append(cpuCeilOut, float64(rawCPU)/(cz+cs))
				ratioCeilOut = append(ratioCeilOut, ri*ci/(cz+cs))
			}
			// Folding off: the same turns with folds due only on generate
			// controls, which the bench never sends. What is left is the
			// per-turn path (decode, apply, checkpoint, ack): the ceiling of
			// the ratio with folds.
			off := procRun{n: o.turns, sessions: s, summarizer: "instant", flush: o.flushInterval, repeated: o.repeated, foldingOff: true}
			res, err = processorRate(ctx, off)
			if err != nil {
				return fmt.Errorf("processor, folding off: %w", err)
			}
			unfolded = append(unfolded, res.rate/raw)
		}
		fmt.Fprintf(w, "%-9d %-26s %-26s %-22s %-26s %-27s", s, medSpread(raws, "%.0f"), medSpread(procs, "%.0f"), medSpread(ratios, "%.2f"), medSpread(cpus, "%.2f"), medSpread(folds, "%.0f"))
		if elsewhere {
			fmt.Fprintf(w, " %-46s", medSpread(instants, "%.2f"))
		}
		if withSized {
			fmt.Fprintf(w, " %-48s", medSpread(sizeds, "%.2f"))
		}
		fmt.Fprintf(w, " %s", medSpread(unfolded, "%.2f"))
		fmt.Fprintln(w)
		if len(sumCPU) > 0 {
			fmt.Fprintf(w, "  CPU per turn µs: processor %s (offline run), %s (instant-sized run), %s (instant run); offline summarizer alone %s (%d folds replayed)\n",
				medSpread(procCPU, "%.1f"), medSpread(sizedCPU, "%.1f"), medSpread(instCPU, "%.1f"), medSpread(sumCPU, "%.1f"), replayed)
			fmt.Fprintf(w, "  what the CPU allows the offline run (instant run + summarizer alone): CPU ratio %s, ratio %s; with its outputs (instant-sized run + summarizer alone): CPU ratio %s, ratio %s\n",
				medSpread(cpuCeil, "%.2f"), medSpread(ratioCeil, "%.2f"), medSpread(cpuCeilOut, "%.2f"), medSpread(ratioCeilOut, "%.2f"))
		}
	}
	return nil
}
