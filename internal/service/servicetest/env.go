// Package servicetest starts what the builder-side tests need: a real
// nats-server in-process (optionally listening on a loopback port, for
// programs in other languages), foldstream's streams, the processor and
// the context service. Nothing stands in for NATS. The server, engine runs
// and waits are brokertest's, shared with the processor's internal tests.
package servicetest

import (
	"context"
	"fmt"
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
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// Env is one server with foldstream's streams and bucket provisioned.
type Env struct {
	T      testing.TB
	NS     *server.Server
	URL    string // client URL; "" unless Listen was set
	NC     *nats.Conn
	JS     jetstream.JetStream
	Layout broker.Layout
	Store  *state.Store
	Log    zerolog.Logger
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
	b := brokertest.Start(t, brokertest.Options{Listen: o.Listen, Log: log, Name: "servicetest"})
	e := &Env{T: t, NS: b.NS, NC: b.NC, JS: b.JS, Layout: b.Layout, Store: state.NewStore(b.JS, b.KV), Log: log}
	if o.Listen {
		e.URL = b.NS.ClientURL()
	}
	return e
}

// Client opens another in-process connection, as a bot or builder would
// have its own.
func (e *Env) Client(name string) (*nats.Conn, jetstream.JetStream) {
	e.T.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(e.NS), nats.Name(name))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		e.T.Fatal(err)
	}
	return nc, js
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

// Checkpoint reads a session's KV checkpoint (a fresh state if none).
func (e *Env) Checkpoint(session string) *state.Session {
	e.T.Helper()
	s, _, err := e.Store.Load(context.Background(), session)
	if err != nil {
		e.T.Fatal(err)
	}
	return s
}

// Eventually polls cond every 5 ms for up to 20 s.
func (e *Env) Eventually(what string, cond func() bool) {
	e.T.Helper()
	brokertest.Eventually(e.T, what, cond)
}

// Settled waits until the checkpoint has total turns, the cursor at
// cursor and no fold in flight.
func (e *Env) Settled(session string, total, cursor int64) *state.Session {
	e.T.Helper()
	var s *state.Session
	e.Eventually(fmt.Sprintf("session %s: total %d, cursor %d, no lease", session, total, cursor), func() bool {
		s = e.Checkpoint(session)
		return s.Total == total && s.Cursor == cursor && s.Lease == nil
	})
	return s
}

// T0 is the timestamp of the first turn Turn makes.
var T0 = time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)

// Turn is turn number i of session: alternating speakers, 10 s apart,
// with a text that names its number.
func Turn(session string, i int) events.Turn {
	speakers := []string{"Alice", "Bob"}
	return events.Turn{
		V: events.Version, Session: session, TurnID: fmt.Sprintf("t%03d", i),
		At:      T0.Add(time.Duration(i) * 10 * time.Second),
		Speaker: speakers[i%2], Role: "user",
		Text: fmt.Sprintf("message number %03d from %s about the ranked match.", i, speakers[i%2]),
	}
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
