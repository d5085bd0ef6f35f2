package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/replay"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("processor replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id to replay (required)")
	asJSON := fs.Bool("json", false, "JSON Lines output for machines")
	showText := fs.Bool("full-text", false, "print whole turn texts instead of the first 120 characters")
	addConnFlags(fs, &o, "", "NATS server URL(s) to read the streams from; empty opens the embedded store at --store-dir")
	addStoreFlag(fs, &o)
	addLogFlags(fs, &o, "warn") // stdout is the timeline; keep stderr for problems
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	if *session == "" {
		return errors.New("session: required, the session id to replay (processor replay S, or --session S)")
	}
	if err := events.CheckSession("--session", *session); err != nil {
		return err
	}
	o.embeddedPort = -1 // replay of the embedded store must not collide with a running processor's port
	e, err := openExisting(ctx, &o, stderr)
	if err != nil {
		return err
	}
	defer e.close()
	tl, err := replay.Load(ctx, e.js, e.layout, *session)
	if err != nil {
		return err
	}
	if len(tl.Entries) == 0 {
		where := "the store " + o.storeDir
		if o.natsURL != "" {
			where = o.natsURL
		}
		return fmt.Errorf("session %q has no events in streams %s, %s and %s of %s (prefix %q): check --session, --prefix and --store-dir or --nats-url",
			*session, tl.Streams[0], tl.Streams[1], tl.Streams[2], where, o.prefix)
	}
	if *asJSON {
		return tl.WriteJSON(stdout)
	}
	return tl.WriteText(stdout, *showText)
}
