// Package brokertest starts what most tests need first: a real nats-server
// in-process with JetStream, a connection, and foldstream's streams and KV
// bucket provisioned under the default prefix. Everything stops when the
// test ends. It imports only broker and events, so any package's tests can
// use it, state's included; internal/testenv, the harness the other tests
// use, is built on it.
package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Env is one provisioned server and a connection to it.
type Env struct {
	NS     *server.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	Layout broker.Layout
	KV     jetstream.KeyValue
}

// Options configure Start; the zero value is in-process only, silent.
type Options struct {
	// Listen opens a TCP listener on a free loopback port, for clients
	// that cannot connect in-process (child processes, other languages).
	Listen bool
	// Log receives connection and provisioning logs.
	Log zerolog.Logger
	// Name is the connection name; default "test".
	Name string
	// Partitions provisions the partitioned inbound layout (scale-out).
	Partitions int
}

// Start starts the server, connects and provisions.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	ns, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, NoListen: !o.Listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if o.Name == "" {
		o.Name = "test"
	}
	nc, err := broker.Connect(broker.ConnConfig{Name: o.Name}, ns, o.Log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subjects, err := events.NewSubjects(events.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	layout := broker.NewLayout(subjects).Partitioned(o.Partitions)
	kv, err := broker.Provision(context.Background(), js, layout, broker.ProvisionConfig{}, o.Log)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{NS: ns, NC: nc, JS: js, Layout: layout, KV: kv}
}

// StartConfig starts a nats-server from the config file at path (one of
// nats/auth's, say) as it is, except where it listens and stores: a free
// loopback port, no monitoring port, a fresh store directory. It stops
// when the test ends.
func StartConfig(t testing.TB, path string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir, opts.NoSigs, opts.NoLog = t.TempDir(), true, true
	// Under -race a bcrypt check can take longer than the server's short
	// first PING, which the client then reads instead of its CONNECT PONG.
	opts.DisableShortFirstPing = true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return ns
}

// Engine is what RunEngine runs: the processor, or anything that runs
// until its context ends and says when it is ready.
type Engine interface {
	Run(ctx context.Context) error
	Ready() <-chan struct{}
}

// RunEngine runs e until the test ends or stop is called, after waiting
// until it is ready; an engine that exits before, or is not ready within
// 20 s, fails the test. stop waits for Run to return and fails the test if
// it returned an error or did not return within 20 s. The one way every
// package's tests run a processor.
func RunEngine(t testing.TB, e Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case <-e.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("engine exited before it was ready: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("engine not ready in 20 s")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("engine: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("engine did not stop in 20 s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// Eventually polls cond every 5 ms until it holds, or fails the test
// naming what it waited for after 20 s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, 20*time.Second, what, cond)
}

// EventuallyWithin is Eventually with its own deadline, for a wait whose
// pace is set by the machine rather than by the code under test (a
// publisher's progress on a replicated cluster).
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cond() {
		return
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}
