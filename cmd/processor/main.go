// Command processor runs foldstream: it consumes a bot's turns from NATS
// JetStream, folds old turns into a bounded running summary and publishes
// summary-updated events. Its other subcommands are the operator's and the
// builder's tools, so that nothing but this binary is needed (no NATS CLI):
//
//	processor [run] [flags]        run the processor (embedded nats-server when no --nats-url)
//	processor demo [flags]         run it with a demo bot on the embedded default
//	processor replay S             print a session's timeline from the streams
//	processor pub S ...            publish a turn, note or control (or JSON lines from stdin)
//	processor tail S               follow a session's summaries and events
//	processor sessions [S]         list sessions, or show one's state, lag and lease
//	processor context S            the packed context a prompt builder gets
//	processor dlq [redrive] [S]    list rejected events, or publish them again after a fix
//	processor migrate --partitions N  change the partition count, every instance stopped
//	processor healthcheck          exit 0 if a processor's /healthz answers ok
//	processor ui [flags]           serve the session inspector, a read-only web page (docs/inspector.md)
//	processor version
//
// A session may also be given as --session S. Each subcommand's -h lists
// only its own flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

var version = "dev"

// command is one subcommand: its name, a one-line summary for the usage
// text, and its entry point, which parses its own flags from args.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands in the order the usage lists them. Adding
// one is one line here and one file beside this one.
var commands = []command{
	{"run", "run the processor (the default; an embedded nats-server when no --nats-url)", runProcessor},
	{"demo", "run the processor with a demo bot on the embedded default", runDemo},
	{"replay", "print a session's timeline from the streams", runReplay},
	{"pub", "publish a turn, note or control event (or JSON lines from stdin)", runPub},
	{"tail", "follow a session's summaries and lifecycle events", runTail},
	{"sessions", "list sessions, or show one session's state, lag and lease", runSessions},
	{"context", "print the packed context a prompt builder gets", runContext},
	{"dlq", "list rejected events with their error; dlq redrive publishes them again", runDLQ},
	{"migrate", "change the inbound stream's partition count (--partitions N), every instance stopped", runMigrate},
	{"ui", "serve the session inspector, a read-only web page (docs/inspector.md)", runUI},
	{"healthcheck", "exit 0 if a processor's /healthz answers ok (the container healthcheck)", runHealthcheck},
	{"version", "print the version", runVersion},
}

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
	name := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	switch name {
	case "help", "-h", "--help":
		usage(stdout)
		return nil
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args, stdout, stderr)
		}
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return fmt.Errorf("unknown command %q: expected one of %s (processor help lists them)", name, strings.Join(names, ", "))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: processor [command] [flags]; processor <command> -h lists the command's flags")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
}

func runProcessor(ctx context.Context, args []string, _, stderr io.Writer) error {
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
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("processor version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "foldstream processor", version)
	return nil
}
