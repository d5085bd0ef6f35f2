package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/prompt"
	"github.com/foldstream/foldstream/internal/partition"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

func newLogger(o *options, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(o.logLevel)
	if err != nil || o.logLevel == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level: expected debug, info, warn or error, got %q", o.logLevel)
	}
	if o.logPretty {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("service", "foldstream").Logger(), nil
}

// env is a connected, provisioned NATS environment.
type env struct {
	ns *server.Server // nil when an external server is used
	nc *nats.Conn
	js jetstream.JetStream
	// fnc/fjs: the fold path's own connection (processor.Deps.FoldJS),
	// opened by the processor command only.
	fnc    *nats.Conn
	fjs    jetstream.JetStream
	layout broker.Layout
	kv     jetstream.KeyValue
	// metricsAddr is the address /metrics listens on ("" when off).
	metricsAddr string
}

func (e *env) close() {
	for _, nc := range []*nats.Conn{e.fnc, e.nc} {
		if nc == nil {
			continue
		}
		_ = nc.Drain()
		for i := 0; i < 50 && !nc.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if e.ns != nil {
		e.ns.Shutdown()
		e.ns.WaitForShutdown()
	}
}

// openExisting opens the deployment's streams for a subcommand that
// reads or changes them without provisioning (replay, migrate): its
// logger on stderr (--log-level), then the connection or the embedded
// store.
func openExisting(ctx context.Context, o *options, stderr io.Writer) (*env, error) {
	log, err := newLogger(o, stderr)
	if err != nil {
		return nil, err
	}
	return openEnv(ctx, o, log, false)
}

func openEnv(ctx context.Context, o *options, log zerolog.Logger, provision bool) (*env, error) {
	subjects, err := events.NewSubjects(o.prefix)
	if err != nil {
		return nil, fmt.Errorf("--prefix: %w", err)
	}
	if o.partitions < 0 || o.partitions > 1024 {
		return nil, fmt.Errorf("--partitions: expected 0 (one consumer, no partitions) to 1024, got %d", o.partitions)
	}
	e := &env{layout: broker.NewLayout(subjects).Partitioned(o.partitions)}
	if o.natsURL == "" {
		dir, err := filepath.Abs(o.storeDir)
		if err != nil {
			return nil, fmt.Errorf("--store-dir: %w", err)
		}
		if e.ns, err = broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: o.embeddedPort}); err != nil {
			return nil, err
		}
		log.Info().Str("event", "embedded_server_started").Str("url", e.ns.ClientURL()).Str("store_dir", dir).
			Msg("no --nats-url: started an embedded nats-server with JetStream")
	}
	if e.nc, e.js, err = connect(o, e.ns, "foldstream-processor", log); err != nil {
		e.close()
		return nil, err
	}
	if provision {
		e.kv, err = broker.Provision(ctx, e.js, e.layout, broker.ProvisionConfig{Replicas: o.replicas, MaxAge: o.maxAge}, log)
		if err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

// connect opens one client connection with the command's NATS options.
func connect(o *options, ns *server.Server, name string, log zerolog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := broker.Connect(broker.ConnConfig{
		URL: o.natsURL, Name: name, User: o.natsUser, Password: o.natsPassword, Token: o.natsToken,
		NKeySeed: o.natsNKey, CredsFile: o.natsCreds, TLSCA: o.natsTLSCA, TLSCert: o.natsTLSCert, TLSKey: o.natsTLSKey,
		InboxPrefix: o.inboxPrefix,
	}, ns, log)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
		log.Warn().Err(err).Str("event", "publish_failed").Str("subject", m.Subject).Msg("async publish failed")
	}), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

func buildSummarizer(o *options, log zerolog.Logger) (fold.Summarizer, error) {
	kind := o.summarizer
	if kind == "auto" {
		kind = "offline"
		if o.openaiKey != "" || o.openaiBaseURL != "" {
			kind = "openai"
		}
	}
	switch kind {
	case "offline":
		if len(o.prompts) > 0 {
			log.Warn().Str("event", "prompts_ignored").Msg("prompt templates from the config file apply to the openai summarizer only")
		}
		return offline.New(), nil
	case "openai":
		tmpl := prompt.Defaults()
		if len(o.prompts) > 0 {
			var err error
			if tmpl, err = prompt.Load(o.prompts); err != nil {
				return nil, fmt.Errorf("config file prompts: %w", err)
			}
		}
		return openai.New(openai.Config{
			BaseURL: o.openaiBaseURL, APIKey: o.openaiKey, Org: o.openaiOrg, Model: o.openaiModel,
			Timeout: o.openaiTimeout, Temperature: float32(o.openaiTemperature), MaxOutputTokens: o.openaiMaxTokens,
			APIType: o.openaiAPIType, AzureAPIVersion: o.azureAPIVersion, Templates: tmpl,
		}, log)
	default:
		return nil, fmt.Errorf("--summarizer: expected auto, offline or openai, got %q", o.summarizer)
	}
}

func processorConfig(o *options, sum fold.Summarizer) processor.Config {
	maxFolds := o.maxFolds
	if maxFolds == 0 && sum != nil && sum.Name() == offline.Model {
		// The offline summarizer is CPU-bound: leave cores for ingest.
		maxFolds = max(1, runtime.NumCPU()/2)
	}
	return processor.Config{
		MaxConcurrentFolds: maxFolds,
		Window:             o.policy.Window,
		Trigger:            o.trigger, Profile: fold.Profile(o.profile), Shards: o.shards,
		FoldTimeout: o.foldTimeout, LeaseTTL: o.leaseTTL, FlushInterval: o.flushInterval, IdleCompact: idleCompact(o.idleCompact),
		MaxClockSkew:         maxClockSkew(o.maxClockSkew),
		Mode:                 fold.Mode(o.mode),
		Tokens:               idleOff(o.policy.Tokens),
		Evict:                o.policy.Evict,
		Interval:             o.policy.Interval,
		MaskToolOutputsAfter: o.policy.MaskToolOutputsAfter,
		KeepEnded:            o.keepEnded,
		// Recall is an endpoint of the service: without it mode evict
		// falls back to tokens.
		RecallEnabled: o.service,
	}
}

// idleOff maps --idle-after 0 (idle folds off) to the config's negative:
// its 0 takes the default.
func idleOff(t fold.TokenPolicy) fold.TokenPolicy {
	if t.IdleAfter == 0 {
		t.IdleAfter = -1
	}
	return t
}

// maxClockSkew maps the flag's 0 (off) to the config's negative.
func maxClockSkew(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// idleCompact maps the flag's 0 (off) to the config's negative.
func idleCompact(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// serve runs the processor until ctx ends. started, if non-nil, receives
// the environment once the processor consumes.
func serve(ctx context.Context, o *options, log zerolog.Logger, started func(*env)) error {
	sum, err := buildSummarizer(o, log)
	if err != nil {
		return err
	}
	cfg := processorConfig(o, sum)
	if o.contextSources != "" {
		if cfg.ContextSources, err = contextsource.LoadSources(o.contextSources); err != nil {
			return fmt.Errorf("--context-sources: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	counter, err := tokens.New(o.tokenizer)
	if err != nil {
		return fmt.Errorf("--tokenizer: %w", err)
	}
	if err := checkPorts(o); err != nil {
		return err
	}
	e, err := openEnv(ctx, o, log, true)
	if err != nil {
		return err
	}
	defer e.close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store := state.NewStore(e.js, e.kv)
	if e.fnc, e.fjs, err = connect(o, e.ns, "foldstream-processor-folds", log); err != nil {
		return err
	}
	// One breaker for the summarizer's endpoint, shared by every engine of
	// this process and reported by /healthz.
	breaker := retry.NewBreaker(retry.BreakerConfig{Endpoint: sum.Name(), OpenFor: cfg.BreakerOpenFor, MaxOpenFor: cfg.BreakerMaxOpenFor}, log)
	deps := processor.Deps{
		JS: e.js, FoldJS: e.fjs, Layout: e.layout, Store: store, Summarizer: sum, Tokens: counter,
		Log: log, Clock: processor.SystemClock{}, Registry: reg, Breaker: breaker,
	}
	var (
		runner interface {
			Run(context.Context) error
			Ready() <-chan struct{}
		}
	)
	if o.partitions > 0 {
		if runner, err = partitioned(ctx, o, cfg, deps, e, log, reg); err != nil {
			return err
		}
	} else {
		p, err := processor.New(cfg, deps)
		if err != nil {
			return err
		}
		runner = p
	}
	stopMetrics, addr, err := serveMetrics(o.metricsAddr, reg, e.nc, breaker.Health, log)
	if err != nil {
		return err
	}
	e.metricsAddr = addr
	defer stopMetrics()
	if started != nil {
		go func() {
			select {
			case <-runner.Ready():
				started(e)
			case <-ctx.Done():
			}
		}()
	}
	if o.service {
		// The context service only reads the checkpoints and the inbound
		// stream, so it shares the processor's connection; it stops when
		// ctx ends, before the connection drains.
		opts := []service.Option{service.IndexBytes(o.recallIndexBytes), service.IndexStoreBytes(o.recallStoreBytes), service.IndexStoreInMemory(o.recallStoreMemory), service.Registerer(reg), service.Admission(cfg.Admission())}
		if o.embeddingsURL != "" {
			opts = append(opts, service.Embeddings(service.EmbeddingsConfig{BaseURL: o.embeddingsURL, Model: o.embeddingsModel, APIKey: o.embeddingsKey}))
		}
		svc, err := service.Start(ctx, e.nc, e.js, e.layout, store, counter, log, opts...)
		if err != nil {
			return err
		}
		defer func() { _ = svc.Stop() }()
	}
	if o.ui.addr != "" {
		stopUI, _, err := startInspector(o, e, sum, counter, log)
		if err != nil {
			return err
		}
		defer stopUI()
	}
	return runner.Run(ctx)
}

// partitioned builds this instance's partition manager (scale-out): it
// joins the members in the <BASE>_PARTITIONS bucket and runs one engine
// per partition it owns.
func partitioned(ctx context.Context, o *options, cfg processor.Config, deps processor.Deps, e *env, log zerolog.Logger, reg *prometheus.Registry) (*partition.Manager, error) {
	instance := o.instanceID
	if instance == "" {
		instance = defaultInstanceID()
	}
	pc := partition.Config{Instance: instance, Partitions: o.partitions, TTL: o.partitionTTL}
	if err := pc.Validate(); err != nil {
		return nil, err
	}
	kv, ttl, err := partition.OpenBucket(ctx, e.js, e.layout.Owners, o.partitionTTL, o.replicas, jetstream.FileStorage, log)
	if err != nil {
		return nil, err
	}
	pc.TTL = ttl
	cfg.InstanceID = instance
	deps.Shared = processor.NewShared(reg, cfg.MaxConcurrentFolds)
	start, err := processor.PartitionStarter(cfg, deps)
	if err != nil {
		return nil, err
	}
	return partition.New(pc, kv, start, log, partition.SystemClock{}, reg)
}

// defaultInstanceID is the host name (as a key token) and a random suffix:
// readable in logs, unique across restarts.
func defaultInstanceID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, host)
	if len(host) > 40 {
		host = host[:40]
	}
	if host == "" {
		host = "foldstream"
	}
	return host + "-" + nuid.Next()
}

// serveMetrics serves /metrics and /healthz on addr until the returned
// stop is called; it returns the address it listens on ("" when addr is
// empty). /healthz answers 503 when the NATS connection is down, and 503
// "degraded: <reason>" while the summarizer refuses every request (its
// breaker is open: a wrong key, a missing model), so that a deployment that
// cannot fold says so.
func serveMetrics(addr string, reg *prometheus.Registry, nc *nats.Conn, health func() (bool, string), log zerolog.Logger) (func(), string, error) {
	if addr == "" {
		return func() {}, "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-addr %s: %w (--metrics-addr 127.0.0.1:0 takes a free port, --metrics-addr '' serves no metrics)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if nc.Status() != nats.CONNECTED {
			http.Error(w, "nats: "+strings.ToLower(nc.Status().String()), http.StatusServiceUnavailable)
			return
		}
		if ok, reason := health(); !ok {
			http.Error(w, "degraded: "+reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("event", "metrics_server_failed").Msg("metrics server stopped")
		}
	}()
	log.Info().Str("event", "metrics_listening").Str("addr", ln.Addr().String()).Msg("serving /metrics and /healthz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, ln.Addr().String(), nil
}
