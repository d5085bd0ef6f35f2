package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/foldstream/foldstream/internal/demo"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("processor demo", &o)
	fs.SetOutput(stderr)
	session := fs.String("session", "demo", "session id the demo bot talks in")
	turns := fs.Int("turns", 121, "turns the demo bot publishes (folds happen at 61, 71, ...)")
	interval := fs.Duration("interval", 20*time.Millisecond, "pause between turns")
	seed := fs.Int64("seed", 1, "conversation generator seed")
	o.logLevel = "warn"
	if err := parseOptions(fs, &o, args, nil); err != nil {
		return err
	}
	if o.natsURL == "" && o.storeDir == "./data" {
		o.storeDir = "./data/demo"
	}
	log, err := newLogger(&o, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	demoErr := make(chan error, 1)
	err = serve(ctx, &o, log, func(e *env) {
		fmt.Fprintf(stdout, "foldstream demo: processor is up on %s; the demo bot publishes %d turns to session %q\n",
			e.nc.ConnectedUrlRedacted(), *turns, *session)
		err := demo.Run(ctx, e.nc, e.js, e.layout.Subjects, demo.Config{
			Session: *session, Turns: *turns, Interval: *interval, Seed: *seed, Notes: true,
		}, stdout, log)
		if err == nil {
			fmt.Fprintf(stdout, "(the demo store is %s: pass --store-dir %s to replay)\n", o.storeDir, o.storeDir)
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
