package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/foldstream/foldstream/internal/replay"
	"github.com/nats-io/nats.go/jetstream"
)

// recoverySection crashes the processor binary (SIGKILL) while one long
// session is being ingested and folded, restarts it, and measures how long
// the new process takes to attach and to have the session rebuilt and
// every event applied and checkpointed again, and how many inbound events
// it re-read to do so; then it replays that session's whole history with
// internal/replay, the event-sourcing alternative.
func recoverySection(ctx context.Context, w io.Writer, o opts) error {
	const burst = 1000
	n := o.recoverTurns
	fmt.Fprintf(w, "recovery: processor binary SIGKILLed after %d turns of one session plus a burst of %d, then restarted\n", n, burst)
	var attach, caught, reread, behind, chunks, replayMS, entries []float64
	for range o.runs {
		r, err := recoveryRun(ctx, n, burst)
		if err != nil {
			return err
		}
		attach, caught = append(attach, ms(r.attach)), append(caught, ms(r.caughtUp))
		reread, behind, chunks = append(reread, float64(r.reread)), append(behind, float64(r.behind)), append(chunks, float64(r.chunks))
		replayMS, entries = append(replayMS, ms(r.replay)), append(entries, float64(r.entries))
	}
	fmt.Fprintf(w, "  %-52s %s\n", "restart to consumer attached ms", medSpread(attach, "%.0f"))
	fmt.Fprintf(w, "  %-52s %s\n", "restart to session rebuilt, all applied and acked ms", medSpread(caught, "%.0f"))
	fmt.Fprintf(w, "  %-52s %s\n", "events past the ack floor at the crash", medSpread(behind, "%.0f"))
	fmt.Fprintf(w, "  %-52s %s\n", "inbound events re-read by the new process", medSpread(reread, "%.0f"))
	fmt.Fprintf(w, "  %-52s %s\n", fmt.Sprintf("KV reads: 1 checkpoint + sealed ref chunks (of %d events)", n+burst), medSpread(chunks, "%.0f"))
	fmt.Fprintf(w, "  %-52s %s\n", fmt.Sprintf("replay of the session (%d turns + outbound) ms", n+burst), medSpread(replayMS, "%.0f"))
	fmt.Fprintf(w, "  %-52s %s\n", "replay entries", medSpread(entries, "%.0f"))
	return nil
}

type recoveryResult struct {
	attach, caughtUp, replay time.Duration
	reread, behind, chunks   int
	entries                  int
}

func recoveryRun(ctx context.Context, n, burst int) (recoveryResult, error) {
	var r recoveryResult
	e, err := newEnv(true)
	if err != nil {
		return r, err
	}
	defer e.close()
	l, kv, err := e.provision(ctx, "fold")
	if err != nil {
		return r, err
	}
	a, err := startChild(e.ns.ClientURL())
	if err != nil {
		return r, err
	}
	if err := a.waitReady(ctx); err != nil {
		a.kill()
		return r, err
	}
	subs, data := payloads(l.Subjects, n+burst, 1, false, false)
	if err := publishAll(ctx, e.js, subs[:n], data[:n]); err != nil {
		a.kill()
		return r, err
	}
	if err := waitAcked(ctx, e.js, l.In, uint64(n)); err != nil {
		a.kill()
		return r, err
	}
	if err := publishAll(ctx, e.js, subs[n:], data[n:]); err != nil {
		a.kill()
		return r, err
	}
	a.kill() // mid-burst, folds in flight, checkpoints behind
	floor, err := ackFloor(ctx, e.js, l.In)
	if err != nil {
		return r, err
	}
	last := uint64(n + burst)
	r.behind = int(last - floor)
	if keys, err := kv.ListKeysFiltered(ctx, "sess-00000.refs.>"); err == nil {
		for range keys.Keys() {
			r.chunks++
		}
	}

	b, err := startChild(e.ns.ClientURL())
	if err != nil {
		return r, err
	}
	defer b.stop()
	if err := b.waitReady(ctx); err != nil {
		return r, err
	}
	r.attach = b.readyAt.Sub(b.started)
	if err := waitAcked(ctx, e.js, l.In, last); err != nil {
		return r, err
	}
	r.caughtUp = time.Since(b.started)
	applied, err := b.metric("foldstream_events_applied_total")
	if err != nil {
		return r, err
	}
	redelivered, err := b.metric("foldstream_events_redelivered_total")
	if err != nil {
		return r, err
	}
	r.reread = int(applied + redelivered)

	start := time.Now()
	tl, err := replay.Load(ctx, e.js, l, "sess-00000")
	if err != nil {
		return r, err
	}
	r.replay = time.Since(start)
	r.entries = len(tl.Entries)
	return r, nil
}

// ackFloor is the highest ack floor among the inbound stream's consumers.
func ackFloor(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	var floor uint64
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		floor = max(floor, info.AckFloor.Stream)
	}
	return floor, lister.Err()
}
