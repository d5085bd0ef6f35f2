// Package servicetest is the one test harness (testenv) plus what needs
// the processor: starting it and the context service, for the tests of
// every package above the processor. Nothing stands in for NATS. The
// processor's own tests build their rig on the same testenv.Env.
package servicetest

import (
	"context"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// Env is testenv's environment plus the engines: the processor and the
// context service.
type Env struct {
	*testenv.Env
}

// Options configure New.
type Options struct {
	// Listen opens a TCP listener on a free loopback port (URL is set);
	// otherwise connections are in-process only.
	Listen bool
	// Verbose logs the processor and service at debug level instead of
	// warn.
	Verbose bool
}

// New starts the server and provisions the streams; everything stops when
// the test ends.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	lvl := zerolog.WarnLevel
	if o.Verbose {
		lvl = zerolog.DebugLevel
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(lvl).With().Timestamp().Logger()
	return &Env{testenv.New(t, testenv.Options{Listen: o.Listen, Log: &log, Name: "servicetest"})}
}

// StartProcessor runs the processor with cfg (short flush and backoff
// intervals unless set) and sum (the offline summarizer when nil) until
// the test ends or stop is called.
func (e *Env) StartProcessor(cfg processor.Config, sum fold.Summarizer) (p *processor.Processor, stop func()) {
	e.T.Helper()
	if sum == nil {
		sum = offline.New()
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = 5 * time.Millisecond
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 50 * time.Millisecond
	}
	p, err := processor.New(cfg, processor.Deps{JS: e.JS, Layout: e.Layout, Store: e.Store, Summarizer: sum, Log: e.Log, Clock: processor.SystemClock{}})
	if err != nil {
		e.T.Fatal(err)
	}
	return p, brokertest.RunEngine(e.T, p)
}

// StartService runs the context service on the environment's connection
// until the test ends.
func (e *Env) StartService(tokens service.TokenCounter, opts ...service.Option) micro.Service {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.Start(ctx, e.NC, e.JS, e.Layout, e.Store, tokens, e.Log, opts...)
	if err != nil {
		cancel()
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		cancel()
		_ = svc.Stop()
	})
	return svc
}

// RunProcessorAs runs a processor (offline summarizer, 5 ms flushes) on
// its own connection to url, opened with opts (a user's credentials and
// its inbox prefix, as the shipped auth configs want), after provisioning
// the default layout as that user, and returns that connection's
// JetStream context and the processor's checkpoint store. It
// stops when ctx ends or stop is called; stop waits for it.
func RunProcessorAs(t testing.TB, ctx context.Context, url string, log zerolog.Logger, opts ...nats.Option) (js jetstream.JetStream, store *state.Store, stop func()) {
	t.Helper()
	// A bcrypt check per connect is slow under -race.
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ = jetstream.New(nc)
	subjects, _ := events.NewSubjects("fold")
	layout := broker.NewLayout(subjects)
	kv, err := broker.Provision(ctx, js, layout, broker.ProvisionConfig{}, log)
	if err != nil {
		t.Fatal(err)
	}
	store = state.NewStore(js, kv)
	p, err := processor.New(processor.Config{FlushInterval: 5 * time.Millisecond},
		processor.Deps{JS: js, Layout: layout, Store: store, Summarizer: offline.New(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	return js, store, func() { cancel(); <-done }
}
