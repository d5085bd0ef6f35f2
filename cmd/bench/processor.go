package main

import (
	"context"
	"errors"
	"sync"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/state"
)

// foldStore provisions the streams and bucket of prefix "fold" and opens
// the checkpoint store on them: where the sections that run a processor
// start.
func (e *env) foldStore(ctx context.Context) (broker.Layout, *state.Store, error) {
	l, kv, err := e.provision(ctx, "fold")
	if err != nil {
		return broker.Layout{}, nil, err
	}
	return l, state.NewStore(e.js, kv), nil
}

// runProcessor starts a processor with cfg on l and store, summarizing
// with instant (the sections measure the path around the model, not a
// model). stop cancels it, waits until its Run returned and returns
// Run's error, nil when it ended because it was stopped; calling stop
// again returns the same.
func runProcessor(ctx context.Context, e *env, l broker.Layout, store *state.Store, cfg processor.Config) (stop func() error, err error) {
	p, err := processor.New(cfg, processor.Deps{JS: e.js, Layout: l, Store: store, Summarizer: instant{}, Log: benchLog()})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	return sync.OnceValue(func() error {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}), nil
}
