// Command bench measures foldstream against NATS itself, as ratios from one
// run on one server (see docs/benchmarks.md). It never asserts: it reports.
//
//	go run ./cmd/bench [-turns 100000] [-sessions 1,1000] [-runs 3]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
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

func main() {
	turns := flag.Int("turns", 100000, "turns per measurement")
	sessionsFlag := flag.String("sessions", "1,1000,10000", "comma-separated session counts")
	runs := flag.Int("runs", 3, "runs per measurement (median and spread reported)")
	flag.StringVar(&summarizerKind, "summarizer", "offline", "offline (CPU on the same cores) or http (the openai backend against an in-process chat-completions server that answers at once)")
	flag.DurationVar(&flushInterval, "flush-interval", 0, "processor checkpoint interval (0 = the processor's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the processor runs to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		profileTo = f
	}
	var sessions []int
	for _, s := range strings.Split(*sessionsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -sessions: expected positive integers, got %q\n", s)
			os.Exit(2)
		}
		sessions = append(sessions, n)
	}
	if err := run(os.Stdout, *turns, sessions, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// summarizerKind selects the fold backend (-summarizer).
var summarizerKind string

// flushInterval overrides the processor's checkpoint cadence (-flush-interval).
var flushInterval time.Duration

// benchLog is silent unless FOLDSTREAM_BENCH_LOG names a level (e.g.
// "warn"): then the processor's logs go to stderr.
func benchLog() zerolog.Logger {
	lvl, err := zerolog.ParseLevel(os.Getenv("FOLDSTREAM_BENCH_LOG"))
	if err != nil || os.Getenv("FOLDSTREAM_BENCH_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
}

// profileTo receives the CPU profile of processor runs (-cpuprofile).
var profileTo io.Writer

type env struct {
	ns  *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	dir string
}

func newEnv() (*env, error) {
	dir, err := os.MkdirTemp("", "foldstream-bench-")
	if err != nil {
		return nil, err
	}
	ns, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1, NoListen: true})
	if err != nil {
		return nil, err
	}
	nc, err := broker.Connect(broker.ConnConfig{Name: "bench"}, ns, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		return nil, err
	}
	return &env{ns: ns, nc: nc, js: js, dir: dir}, nil
}

func (e *env) close() {
	e.nc.Close()
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	os.RemoveAll(e.dir)
}

// payloads returns n realistic turn payloads spread round-robin over
// sessions, with their subjects.
func payloads(subjects events.Subjects, n, sessions int) ([]string, [][]byte) {
	subs := make([]string, n)
	data := make([][]byte, n)
	for i := range n {
		s := fmt.Sprintf("sess-%05d", i%sessions)
		t := events.Turn{V: 1, Session: s, TurnID: fmt.Sprintf("%s-%d", s, i/sessions),
			At:      time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
			Speaker: "Alice", Role: "user",
			Text: "Let's try the new team comp on Tokyo tonight; Bob keeps dying as Hulk so maybe Jeff the land shark instead?"}
		data[i], _ = json.Marshal(t)
		subs[i] = subjects.In(s, events.KindTurn)
	}
	return subs, data
}

func publishAll(ctx context.Context, js jetstream.JetStream, subs []string, data [][]byte) error {
	for i := range subs {
		if _, err := js.PublishAsync(subs[i], data[i]); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rawRate is the baseline: a durable pull consumer that only acks, with
// the same pull batch as the processor.
func rawRate(ctx context.Context, n, sessions int) (float64, error) {
	e, err := newEnv()
	if err != nil {
		return 0, err
	}
	defer e.close()
	subjects, _ := events.NewSubjects("raw")
	l := broker.NewLayout(subjects)
	if _, err := broker.Provision(ctx, e.js, l, broker.ProvisionConfig{}, zerolog.Nop()); err != nil {
		return 0, err
	}
	subs, data := payloads(subjects, n, sessions)
	if err := publishAll(ctx, e.js, subs, data); err != nil {
		return 0, err
	}
	cons, err := e.js.CreateOrUpdateConsumer(ctx, l.In, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 65536})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return 0, err
	}
	for got := 0; got < n; {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return 0, err
			}
			continue // e.g. a missed heartbeat under load: the processor retries too
		}
		_ = m.Ack()
		got++
	}
	it.Stop()
	if err := waitAcked(ctx, cons, uint64(n)); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func waitAcked(ctx context.Context, cons jetstream.Consumer, n uint64) error {
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream >= n && info.NumAckPending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// processorRate times the processor from consumer attach until every turn
// is applied, checkpointed and acked. Folds run (offline summarizer) but
// ingest does not wait for them.
func processorRate(ctx context.Context, n, sessions int) (float64, uint64, uint64, error) {
	e, err := newEnv()
	if err != nil {
		return 0, 0, 0, err
	}
	defer e.close()
	subjects, _ := events.NewSubjects("fold")
	l := broker.NewLayout(subjects)
	kv, err := broker.Provision(ctx, e.js, l, broker.ProvisionConfig{}, zerolog.Nop())
	if err != nil {
		return 0, 0, 0, err
	}
	subs, data := payloads(subjects, n, sessions)
	if err := publishAll(ctx, e.js, subs, data); err != nil {
		return 0, 0, 0, err
	}
	sum, maxFolds, closeSum, err := newSummarizer()
	if err != nil {
		return 0, 0, 0, err
	}
	defer closeSum()
	p, err := processor.New(processor.Config{FlushInterval: flushInterval, MaxConcurrentFolds: maxFolds}, processor.Deps{
		JS: e.js, Layout: l, Store: state.NewStore(e.js, kv), Summarizer: sum, Log: benchLog(),
	})
	if err != nil {
		return 0, 0, 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	<-p.Ready()
	if profileTo != nil {
		_ = pprof.StartCPUProfile(profileTo)
		defer pprof.StopCPUProfile()
	}
	start := time.Now() // like the baseline: timed from an attached consumer
	cons, err := e.js.Consumer(ctx, l.In, "foldstream")
	if err != nil {
		cancel()
		return 0, 0, 0, err
	}
	if err := waitAcked(ctx, cons, uint64(n)); err != nil {
		cancel()
		return 0, 0, 0, err
	}
	rate := float64(n) / time.Since(start).Seconds()
	folds := p.Folds() // landed while ingest ran: their work shares the cores
	cancel()
	if err := <-done; err != nil {
		return 0, 0, 0, err
	}
	return rate, p.Applied(), folds, nil
}

// newSummarizer builds the fold backend with the fold concurrency the
// processor command would use for it.
func newSummarizer() (fold.Summarizer, int, func(), error) {
	switch summarizerKind {
	case "offline":
		return offline.New(), max(1, runtime.NumCPU()/2), func() {}, nil
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
		return nil, 0, nil, fmt.Errorf("-summarizer: expected offline or http, got %q", summarizerKind)
	}
}

func run(w io.Writer, n int, sessions []int, runs int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fmt.Fprintf(w, "foldstream bench: %d turns per run, %d runs each, in-process nats-server, file storage, %d CPUs, summarizer %s\n\n", n, runs, runtime.NumCPU(), summarizerKind)
	fmt.Fprintf(w, "%-9s %-26s %-26s %-22s %s\n", "sessions", "raw consume+ack msg/s", "processor ingest turns/s", "ratio (target >= 0.5)", "folds landed during ingest")
	for _, s := range sessions {
		var raws, procs, ratios, folds []float64
		for range runs {
			raw, err := rawRate(ctx, n, s)
			if err != nil {
				return fmt.Errorf("raw baseline: %w", err)
			}
			proc, applied, landed, err := processorRate(ctx, n, s)
			if err != nil {
				return fmt.Errorf("processor: %w", err)
			}
			if applied != uint64(n) {
				return fmt.Errorf("processor applied %d of %d turns", applied, n)
			}
			raws, procs, ratios = append(raws, raw), append(procs, proc), append(ratios, proc/raw)
			folds = append(folds, float64(landed))
		}
		fmt.Fprintf(w, "%-9d %-26s %-26s %-22s %s\n", s, medSpread(raws, "%.0f"), medSpread(procs, "%.0f"), medSpread(ratios, "%.2f"), medSpread(folds, "%.0f"))
	}
	return nil
}

// medSpread formats the median and the min..max spread.
func medSpread(xs []float64, f string) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf(f+" ("+f+".."+f+")", med, s[0], s[len(s)-1])
}
