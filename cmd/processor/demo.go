package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/demo"
)

// runDemo runs the processor with the demo bot. It is the first thing a
// new user runs, so it always starts: a new session per run
// (demo-<date>-<time>), and a busy default port (an earlier demo or processor still
// running) is replaced by a free one, which it prints.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	// Every processor setting, with its default, behind the demo's own
	// flags: a --config file or FOLDSTREAM_* variables may still set them.
	o.settings = newFlagSet("processor demo", &o)
	fs := flag.NewFlagSet("processor demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id the demo bot talks in (default demo-<date>-<time>: a new session each run)")
	turns := fs.Int("turns", 121, "turns the demo bot publishes (folds happen at 61, 71, ...)")
	interval := fs.Duration("interval", 20*time.Millisecond, "pause between turns")
	seed := fs.Int64("seed", 1, "conversation generator seed")
	fs.StringVar(&o.configFile, "config", "", "JSON config file of processor settings (keys are the flag names of processor run -h)")
	addConnFlags(fs, &o, "", "NATS server URL(s) of a running processor's server; empty starts an embedded nats-server")
	fs.StringVar(&o.storeDir, "store-dir", "./data/demo", "JetStream store directory of the embedded nats-server")
	fs.IntVar(&o.embeddedPort, "embedded-port", 4222, "client port of the embedded nats-server; when the default is busy a free one is picked (-1 always picks one)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", defaultMetricsAddr, "Prometheus /metrics and /healthz address (empty disables); when the default is busy a free port is picked")
	fs.StringVar(&o.ui.addr, "ui-addr", "", "also serve the session inspector, e.g. on 127.0.0.1:8080 (docs/inspector.md)")
	addLogFlags(fs, &o, "warn")
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	if *session == "" {
		*session = "demo-" + strings.ReplaceAll(time.Now().UTC().Format("20060102-150405.000"), ".", "-")
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for _, name := range []string{"embedded-port", "metrics-addr"} {
		if os.Getenv("FOLDSTREAM_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))) != "" {
			explicit[name] = true
		}
	}
	if o.natsURL == "" && !explicit["embedded-port"] && o.embeddedPort > 0 && portBusy("127.0.0.1", o.embeddedPort) {
		fmt.Fprintf(stdout, "foldstream demo: port %d is busy (another processor or nats-server?); the embedded nats-server takes a free port instead\n", o.embeddedPort)
		o.embeddedPort = -1
	}
	if !explicit["metrics-addr"] && o.metricsAddr != "" && addrBusy(o.metricsAddr) {
		fmt.Fprintf(stdout, "foldstream demo: %s is busy; /metrics takes a free port instead\n", o.metricsAddr)
		o.metricsAddr = "127.0.0.1:0"
	}
	log, err := newLogger(&o, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	demoErr := make(chan error, 1)
	err = serve(ctx, &o, log, func(e *env) {
		fmt.Fprintf(stdout, "foldstream demo: processor is up on %s", e.nc.ConnectedUrlRedacted())
		if e.metricsAddr != "" {
			fmt.Fprintf(stdout, ", metrics on http://%s/metrics", e.metricsAddr)
		}
		fmt.Fprintf(stdout, "; the demo bot publishes %d turns to session %q\n", *turns, *session)
		err := demo.Run(ctx, e.nc, e.js, e.layout.Subjects, demo.Config{
			Session: *session, Turns: *turns, Interval: *interval, Seed: *seed, Notes: true,
			Recent: o.policy.Window.Recent, Batch: o.policy.Window.Batch,
		}, stdout, log)
		if err == nil {
			fmt.Fprintf(stdout, "Replay it: %s\n", replayHint(&o, *session))
		}
		demoErr <- err
		cancel()
	})
	if err != nil {
		return err
	}
	select {
	case err := <-demoErr:
		return err
	default:
		return nil
	}
}

// replayHint is the replay command for the demo's session, runnable as
// printed from the directory the demo ran in.
func replayHint(o *options, session string) string {
	self := "go run ./cmd/processor"
	if exe := os.Args[0]; !strings.Contains(exe, "go-build") && !strings.HasSuffix(exe, ".test") {
		self = exe // a built binary (bin/processor); go run's lives in a temporary directory
	}
	where := "--store-dir " + shellQuote(o.storeDir)
	if o.natsURL != "" {
		where = "--nats-url " + shellQuote(o.natsURL)
	}
	if o.prefix != "fold" {
		where += " --prefix " + shellQuote(o.prefix)
	}
	return fmt.Sprintf("%s replay %s --session %s", self, where, session)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
