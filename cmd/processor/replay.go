package main

import (
	"context"
	"fmt"
	"io"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/replay"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("processor replay", &o)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id to replay (required)")
	asJSON := fs.Bool("json", false, "JSON Lines output for machines")
	showText := fs.Bool("full-text", false, "print whole turn texts instead of the first 120 characters")
	if err := parseOptions(fs, &o, args, nil); err != nil {
		return err
	}
	if *session == "" {
		return fmt.Errorf("--session: required, the session id to replay")
	}
	if err := events.CheckSession("--session", *session); err != nil {
		return err
	}
	if !o.logLevelSet {
		o.logLevel = "warn" // stdout is the timeline; keep stderr for problems
	}
	o.metricsAddr = ""
	o.embeddedPort = -1 // replay of the embedded store must not collide with a running processor's port
	log, err := newLogger(&o, stderr)
	if err != nil {
		return err
	}
	e, err := openEnv(ctx, &o, log, false)
	if err != nil {
		return err
	}
	defer e.close()
	tl, err := replay.Load(ctx, e.js, e.layout, *session)
	if err != nil {
		return err
	}
	if *asJSON {
		return tl.WriteJSON(stdout)
	}
	return tl.WriteText(stdout, *showText)
}
