package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/inspect"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/rs/zerolog"
)

// defaultUIAddr is where `processor ui` listens unless told otherwise:
// loopback, so that the transcripts it shows reach only this host until a
// reverse proxy with the deployment's auth is put in front
// (docs/inspector.md).
const defaultUIAddr = "127.0.0.1:8080"

// uiOptions are the session inspector's settings (docs/inspector.md).
type uiOptions struct {
	addr         string
	text         string
	textHeader   string
	allowedHosts string
}

// check names a bad setting before anything is started.
func (u uiOptions) check() error {
	switch u.text {
	case inspect.TextAllow, inspect.TextDeny, inspect.TextHeader:
	default:
		return fmt.Errorf("--ui-text: expected allow, deny or header, got %q", u.text)
	}
	if u.text == inspect.TextHeader && strings.TrimSpace(u.textHeader) == "" {
		return fmt.Errorf("--ui-text-header: required with --ui-text header, the request header a reverse proxy sets")
	}
	return nil
}

func addUIFlags(fs *flag.FlagSet, u *uiOptions) {
	fs.StringVar(&u.addr, "ui-addr", "", "serve the session inspector (a read-only web page) on this `host:port`; processor ui defaults to "+defaultUIAddr+", run and demo serve none unless set")
	fs.StringVar(&u.text, "ui-text", inspect.TextAllow, "who sees transcript text in the inspector: allow (everyone who reaches it), deny (no one), or header (requests carrying --ui-text-header: allow, set by an authenticating reverse proxy)")
	fs.StringVar(&u.textHeader, "ui-text-header", inspect.DefaultTextHeader, "with --ui-text header: the request header (value \"allow\") that grants transcript text")
	fs.StringVar(&u.allowedHosts, "ui-allowed-hosts", "", "comma-separated Host header values the inspector answers (default on loopback: 127.0.0.1:<port>, localhost:<port>, [::1]:<port>; elsewhere any)")
}

// runUI is `processor ui`: the inspector alone, on the processor's NATS
// options. With --nats-url it inspects a running deployment through its
// services; without, it opens the embedded store (--store-dir) of a
// stopped processor, like replay, and serves the context service itself
// since nothing else can.
func runUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("processor ui", &o)
	fs.SetOutput(stderr)
	if err := parseOptions(fs, &o, args, nil); err != nil {
		return err
	}
	if o.ui.addr == "" {
		o.ui.addr = defaultUIAddr
	}
	if err := o.ui.check(); err != nil {
		return err
	}
	o.metricsAddr = ""
	embedded := o.natsURL == ""
	if embedded {
		o.embeddedPort = -1 // must not collide with a processor's port
	}
	log, err := newLogger(&o, stderr)
	if err != nil {
		return err
	}
	sum, err := buildSummarizer(&o, log)
	if err != nil {
		return err
	}
	counter, err := tokens.New(o.tokenizer)
	if err != nil {
		return fmt.Errorf("--tokenizer: %w", err)
	}
	e, err := openEnv(ctx, &o, log, false)
	if err != nil {
		return err
	}
	defer e.close()
	kv, err := e.js.KeyValue(ctx, e.layout.Bucket)
	if err != nil {
		return fmt.Errorf("session bucket %s: %w (wrong --prefix, or no processor ever ran here)", e.layout.Bucket, err)
	}
	if embedded {
		svc, err := service.Start(ctx, e.nc, e.js, e.layout, state.NewStore(e.js, kv), counter, log,
			service.Admission(processorConfig(&o, sum).Admission()))
		if err != nil {
			return err
		}
		defer func() { _ = svc.Stop() }()
	}
	stop, url, err := startInspector(&o, e, sum, counter, log)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(stdout, "foldstream inspector on %s (Ctrl-C stops it)\n", url)
	<-ctx.Done()
	return nil
}

// startInspector serves the inspector on o.ui.addr over e's connection.
// sum is the processor's summarizer: what-if refolds may use it besides
// the offline one.
func startInspector(o *options, e *env, sum fold.Summarizer, counter *tokens.Counter, log zerolog.Logger) (stop func(), url string, err error) {
	if err := o.ui.check(); err != nil {
		return nil, "", err
	}
	kv, err := e.js.KeyValue(context.Background(), e.layout.Bucket)
	if err != nil {
		return nil, "", fmt.Errorf("inspector: session bucket %s: %w", e.layout.Bucket, err)
	}
	summarizers := map[string]func() (fold.Summarizer, error){
		offline.Model: func() (fold.Summarizer, error) { return offline.New(), nil },
	}
	if sum != nil && sum.Name() != offline.Model {
		// The configured model, for a refold that should match production;
		// it is called like a fold, so it costs like one.
		summarizers[sum.Name()] = func() (fold.Summarizer, error) { return sum, nil }
	}
	base := processorConfig(o, sum)
	ln, err := net.Listen("tcp", o.ui.addr)
	if err != nil {
		return nil, "", fmt.Errorf("--ui-addr %s: %w", o.ui.addr, err)
	}
	loopback := isLoopback(ln.Addr())
	var hosts []string
	switch {
	case o.ui.allowedHosts != "":
		for _, h := range strings.Split(o.ui.allowedHosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
	case loopback:
		hosts = inspect.LoopbackHosts(ln.Addr())
	}
	ins, err := inspect.New(inspect.Config{
		NC: e.nc, JS: e.js, Layout: e.layout, KV: kv,
		Text: o.ui.text, TextHeaderName: o.ui.textHeader, AllowedHosts: hosts,
		WhatIf: inspect.WhatIfConfig{Base: base, Summarizers: summarizers, Tokens: counter},
		Log:    log,
	})
	if err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	srv := &http.Server{Handler: ins.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("event", "inspector_failed").Msg("inspector server stopped")
		}
	}()
	url = "http://" + ln.Addr().String() + "/"
	ev := log.Info()
	if !loopback {
		ev = log.Warn()
	}
	ev.Str("event", "inspector_listening").Str("url", url).Bool("loopback", loopback).Str("text", o.ui.text).
		Msg("serving the session inspector (read-only); off loopback, put it behind the deployment's auth (docs/inspector.md)")
	return func() {
		ins.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, url, nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
