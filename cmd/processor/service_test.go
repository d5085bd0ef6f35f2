package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// `processor run` serves the context service unless --service=false.
func TestRunServesTheContextService(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		var o options
		fs := newFlagSet("run", &o)
		args := []string{"--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "", "--summarizer", "offline", "--tokenizer", "heuristic"}
		if !enabled {
			args = append(args, "--service=false")
		}
		if err := parseOptions(fs, &o, args, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			done <- serve(ctx, &o, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), func(e *env) {
				b, err := client.NewBuilder(e.nc, e.js, client.RequestTimeout(5*time.Second))
				if err != nil {
					got <- err
					return
				}
				_, err = b.Context(context.Background(), "s1", client.Budget{})
				got <- err
			})
		}()
		var err error
		select {
		case err = <-got:
		case err := <-done:
			t.Fatalf("serve returned early: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("processor did not start")
		}
		if enabled && !client.IsUnknownSession(err) {
			t.Errorf("--service: want the service's 404 for an unknown session, got %v", err)
		}
		if !enabled && !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("--service=false: want no responders, got %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve: %v", err)
		}
	}
}
