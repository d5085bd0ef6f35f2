package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// answered is a summarizer that answers at once with a fixed summary: what
// is left of a fold's cost is the processor's and the server's.
type answered struct{}

func (answered) Name() string { return "answered" }
func (answered) Summarize(context.Context, fold.Request) (fold.Result, error) {
	return fold.Result{Summary: "Alice and Bob planned the Tokyo match; Bob keeps dying as Hulk.", Model: "answered"}, nil
}

// BenchmarkIngest: b.N turns, published before the timer, applied,
// checkpointed and acked by a processor on an in-process server, as
// cmd/bench's ingest section runs it: off, 1,000 sessions with folding off
// (folds due only on generate controls, none sent: the per-turn path);
// folding, 100 sessions folding with a summarizer that answers at once (at
// the default window a session's first fold is due after 60 turns, later
// ones every 10), sessions never packed; packing, the same with the
// default idle packing, where a session packed since its batch came reads
// it from the stream (the slower the run, a profiler's or valgrind's, the
// more sessions are packed). The process runs the server too, so its CPU
// (or an instruction count: valgrind --tool=callgrind on the test binary
// with -test.bench Ingest/off) is the processor's and the server's work.
func BenchmarkIngest(b *testing.B) {
	for _, c := range []struct {
		name        string
		sessions    int
		folding     bool
		idleCompact time.Duration
	}{{"off", 1000, false, -1}, {"folding", 100, true, -1}, {"packing", 100, true, 0}} {
		b.Run(c.name, func(b *testing.B) {
			log := zerolog.Nop()
			env := testenv.New(b, testenv.Options{Log: &log})
			trigger := TriggerGenerate
			if c.folding {
				trigger = TriggerTurn
			}
			ingest(b, env, c.sessions, Config{Trigger: trigger, MaxConcurrentFolds: 32, IdleCompact: c.idleCompact})
		})
	}
}

func ingest(b *testing.B, env *testenv.Env, sessions int, cfg Config) {
	ctx := context.Background()
	// One second apart, ending now: an at far ahead of when the stream
	// stored the turn is rejected.
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Duration(b.N) * time.Second)
	speakers := []string{"Alice", "Bob", "Carol", "Dan"}
	for i := range b.N {
		s := fmt.Sprintf("sess-%05d", i%sessions)
		t := events.Turn{V: 1, Session: s, TurnID: fmt.Sprintf("%s-%d", s, i/sessions), At: base.Add(time.Duration(i) * time.Second),
			Speaker: speakers[i%len(speakers)], Role: "user", Text: fmt.Sprintf("Let's try the new team comp on map %d tonight; Bob keeps dying as Hulk so maybe Jeff instead?", i%50)}
		data, err := json.Marshal(t)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err = env.JS.PublishAsync(env.Layout.Subjects.In(s, events.KindTurn), data); !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				break
			}
			<-env.JS.PublishAsyncComplete()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	<-env.JS.PublishAsyncComplete()
	p, err := New(cfg, Deps{JS: env.JS, Layout: env.Layout, Store: env.Store, Summarizer: answered{}, Log: env.Log, Clock: SystemClock{}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := processCPU()
	stop := brokertest.RunEngine(b, p)
	defer stop()
	for p.Applied() < uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	// Acked: every turn's checkpoint is stored (the consumer's ack floor
	// at the last turn).
	for {
		c, err := env.JS.Consumer(ctx, env.Layout.In, p.cons.name())
		if err == nil && c.CachedInfo().AckFloor.Stream >= uint64(b.N) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-us/op")
}
