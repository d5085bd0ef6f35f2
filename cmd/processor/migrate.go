package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/foldstream/foldstream/internal/broker"
)

// runMigrate changes the inbound stream's partition count with every
// processor instance stopped (broker.Migrate): it checks that every
// consumer is drained, sets the stream's subject transform, creates the
// new layout's consumers where the old ones stopped and removes the old
// ones, or refuses with the reason and changes nothing.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("processor migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: processor migrate --partitions N [flags]
Changes the inbound stream's partition count (0 = no partitions) with every processor instance
stopped: it refuses while a consumer has events pending or a processor still reads it. Start the
instances with the same --partitions afterwards. docs/deployment.md, "Changing the partition count".
`)
		fs.PrintDefaults()
	}
	partitions := fs.Int("partitions", -1, "the new partition count: 0 (one consumer, no partitions) to 1024 (required)")
	addConnFlags(fs, &o, "", "NATS server URL(s) of the deployment; empty opens the embedded store at --store-dir (the processor stopped)")
	addStoreFlag(fs, &o)
	fs.IntVar(&o.embeddedPort, "embedded-port", -1, "with no --nats-url: client port of the embedded nats-server opened on --store-dir (-1 picks a free one)")
	addLogFlags(fs, &o, "warn")
	if err := parseOptions(fs, &o, args, nil); err != nil {
		return err
	}
	if *partitions < 0 {
		return fmt.Errorf("--partitions: required, the new partition count (0 for none)")
	}
	e, err := openExisting(ctx, &o, stderr)
	if err != nil {
		return err
	}
	defer e.close()
	rep, err := broker.Migrate(ctx, e.js, e.layout, broker.MigrateConfig{Partitions: *partitions})
	if err != nil {
		return err
	}
	if rep.From == rep.To {
		fmt.Fprintf(stdout, "stream %s already has %s: nothing changed\n", e.layout.In, partitionsText(rep.To))
		return nil
	}
	fmt.Fprintf(stdout, "stream %s: %s -> %s\n", e.layout.In, partitionsText(rep.From), partitionsText(rep.To))
	fmt.Fprintf(stdout, "removed consumers: %s\n", listText(rep.Removed))
	fmt.Fprintf(stdout, "created consumers: %s (from stream sequence %d)\n", listText(rep.Created), rep.StartSeq)
	if len(rep.Kept) > 0 {
		fmt.Fprintf(stdout, "left as they are: %s (not the processor's)\n", listText(rep.Kept))
	}
	if rep.To > 0 {
		fmt.Fprintf(stdout, "start every instance with --partitions %d\n", rep.To)
	} else {
		fmt.Fprintln(stdout, "start one instance without --partitions")
	}
	return nil
}

func partitionsText(n int) string {
	if n == 0 {
		return "no partitions"
	}
	return fmt.Sprintf("%d partitions", n)
}

func listText(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
