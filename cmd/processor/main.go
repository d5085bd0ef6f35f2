// Command processor runs foldstream: it consumes a bot's turns from NATS
// JetStream, folds old turns into a bounded running summary and publishes
// summary-updated events.
//
//	processor [run] [flags]        run the processor (embedded nats-server when no --nats-url)
//	processor demo [flags]         run it with a demo bot on the embedded default
//	processor replay --session S   print a session's timeline from the streams
//	processor ui [flags]           serve the session inspector, a read-only web page (docs/inspector.md)
//	processor version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "processor:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		var o options
		fs := newFlagSet("processor run", &o)
		fs.SetOutput(stderr)
		if err := parseOptions(fs, &o, args, nil); err != nil {
			return err
		}
		log, err := newLogger(&o, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, &o, log, nil)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "replay":
		return runReplay(ctx, args, stdout, stderr)
	case "ui":
		return runUI(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "foldstream processor", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: processor [run|demo|replay|ui|version] [flags]; processor <command> -h lists the flags")
		return nil
	default:
		return fmt.Errorf("unknown command %q: expected run, demo, replay, ui or version", cmd)
	}
}
