package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/inspect"
	"github.com/foldstream/foldstream/internal/replay"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// migrationTurn is turn i of the migration test's session: its own word
// (marker<i>) for recall to find.
func migrationTurn(i int) client.Turn {
	return client.Turn{Session: "s1", TurnID: fmt.Sprintf("t%02d", i), Speaker: "Alice", Role: "user",
		Text: fmt.Sprintf("marker%d the team talked about the release plan", i)}
}

// runPhase runs the processor on the embedded store dir with the given
// partition count, calls fn once it consumes, and stops it.
func runPhase(t *testing.T, dir string, partitions int, fn func(ctx context.Context, e *env) error) string {
	t.Helper()
	var o options
	fs := newFlagSet("run", &o)
	args := []string{"--store-dir", dir, "--embedded-port", "-1", "--metrics-addr", "", "--summarizer", "offline",
		"--tokenizer", "heuristic", "--partitions", strconv.Itoa(partitions), "--partition-ttl", "2s", "--instance-id", "solo"}
	if err := parseOptions(fs, &o, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	checked := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, &o, zerolog.New(&logs).Level(zerolog.InfoLevel), func(e *env) { checked <- fn(ctx, e) })
	}()
	select {
	case err := <-checked:
		if err != nil {
			t.Fatalf("%d partitions: %v\n%s", partitions, err, logs.String())
		}
	case err := <-done:
		t.Fatalf("%d partitions: serve returned early: %v\n%s", partitions, err, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("%d partitions: serve: %v", partitions, err)
	}
	return logs.String()
}

// publishAndCheck publishes turns [from, to) of s1, waits until the
// processor caught up with all `to` of them, and checks that the context,
// recall and replay see every turn once, from every layout so far.
func publishAndCheck(ctx context.Context, e *env, from, to int) error {
	pub, err := client.NewPublisher(e.js)
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		if err := pub.PublishTurn(ctx, migrationTurn(i)); err != nil {
			return err
		}
	}
	// The first turn again, without the publisher's message id, so the
	// stream stores it under this layout: the readers must count it once.
	data, _ := json.Marshal(events.Turn{V: 1, Session: "s1", TurnID: "t00", At: time.Now().UTC(), Speaker: "Alice", Role: "user", Text: "a copy of t00"})
	if _, err := e.js.Publish(ctx, e.layout.Subjects.In("s1", events.KindTurn), data); err != nil {
		return err
	}
	b, err := client.NewBuilder(e.nc, e.js, client.RequestTimeout(10*time.Second))
	if err != nil {
		return err
	}
	for {
		info, err := b.Session(ctx, "s1")
		if err == nil && info.TotalTurns == int64(to) && info.CaughtUp {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the processor did not catch up with %d turns: %+v, %v", to, info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := b.Context(ctx, "s1", client.Budget{})
	if err != nil {
		return err
	}
	var ids []string
	for _, turn := range c.Turns {
		ids = append(ids, turn.TurnID)
	}
	if c.TotalTurns != int64(to) || len(ids) != to || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != to {
		return fmt.Errorf("context: %d turns in all, verbatim %v; want t00..t%02d once each", c.TotalTurns, ids, to-1)
	}
	for _, i := range []int{0, from / 2, from, to - 1} {
		r, err := b.Recall(ctx, "s1", fmt.Sprintf("marker%d", i), client.RecallOptions{Scope: client.RecallScopeAll})
		if err != nil {
			return err
		}
		if r.Searched != to || len(r.Results) == 0 || r.Results[0].TurnID != migrationTurn(i).TurnID {
			return fmt.Errorf("recall of marker%d: %d turns searched, results %+v; want %d searched, t%02d first", i, r.Searched, r.Results, to, i)
		}
	}
	tl, err := replay.Load(ctx, e.js, e.layout, "s1")
	if err != nil {
		return err
	}
	if tl.Totals.Turns != to || tl.Totals.DuplicateTurns != from/10+1 {
		return fmt.Errorf("replay: %d turns, %d duplicates; want %d and %d", tl.Totals.Turns, tl.Totals.DuplicateTurns, to, from/10+1)
	}
	return nil
}

// A deployment moves from one processor to 4 partitions and back with
// processor migrate, publishing between the moves: the context, recall,
// replay, the processor's rebuild of a broken checkpoint and the
// inspector see every turn of every layout, once.
func TestMigrateKeepsHistory(t *testing.T) {
	dir := t.TempDir()
	migrate := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := run(ctx, append([]string{"migrate"}, args...), &out, &errOut)
		return out.String(), err
	}

	runPhase(t, dir, 0, func(ctx context.Context, e *env) error { return publishAndCheck(ctx, e, 0, 10) })
	if _, err := migrate("--store-dir", dir); err == nil || !strings.Contains(err.Error(), "--partitions") {
		t.Errorf("migrate without --partitions: %v", err)
	}
	out, err := migrate("--store-dir", dir, "--partitions", "4")
	if err != nil {
		t.Fatalf("migrate to 4: %v", err)
	}
	for _, want := range []string{"no partitions -> 4 partitions", "removed consumers: foldstream\n", "foldstream-p3of4", "--partitions 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate to 4 printed %q, want %q", out, want)
		}
	}
	if out, err := migrate("--store-dir", dir, "--partitions", "4"); err != nil || !strings.Contains(out, "nothing changed") {
		t.Errorf("migrate to the same count: %q, %v", out, err)
	}

	runPhase(t, dir, 4, func(ctx context.Context, e *env) error {
		if err := publishAndCheck(ctx, e, 10, 20); err != nil {
			return err
		}
		// A running instance: refused, nothing changed.
		_, err := migrate("--nats-url", e.ns.ClientURL(), "--partitions", "0")
		var refused *broker.MigrateRefused
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "solo") {
			return fmt.Errorf("migrate with an instance running: %v, want a refusal naming it", err)
		}
		s, err := e.js.Stream(ctx, e.layout.In)
		if err != nil {
			return err
		}
		if tr := s.CachedInfo().Config.SubjectTransform; tr == nil || !strings.Contains(tr.Destination, ".part.4.") {
			return fmt.Errorf("the refused migrate changed the transform: %+v", tr)
		}
		return nil
	})
	if out, err := migrate("--store-dir", dir, "--partitions", "0"); err != nil || !strings.Contains(out, "4 partitions -> no partitions") {
		t.Fatalf("migrate back to 0: %q, %v", out, err)
	}

	logs := runPhase(t, dir, 0, func(ctx context.Context, e *env) error {
		// A broken checkpoint: the processor rebuilds the session from the
		// streams, both layouts' events.
		if _, err := e.kv.Put(ctx, "s1", []byte("not a checkpoint")); err != nil {
			return err
		}
		return publishAndCheck(ctx, e, 20, 30)
	})
	if !strings.Contains(logs, `"event":"checkpoint_quarantined"`) || !strings.Contains(logs, `"events_replayed":`) {
		t.Errorf("no rebuild of the broken checkpoint in the logs")
	}

	// The inspector on the store: every turn once, the copies flagged.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	uiOut := &testlog.Buffer{}
	uiDone := make(chan error, 1)
	go func() {
		uiDone <- run(ctx, []string{"ui", "--store-dir", dir, "--ui-addr", "127.0.0.1:0", "--log-level", "warn"}, uiOut, io.Discard)
	}()
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/)`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && base == ""; time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(uiOut.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("processor ui printed no address: %q", uiOut.String())
	}
	res, err := http.Get(base + "api/sessions/s1/timeline?kinds=turns&limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	var page inspect.TimelinePage
	err = json.NewDecoder(res.Body).Decode(&page)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	copies := 0
	for _, it := range page.Items {
		if it.Turn == nil {
			continue
		}
		if it.Turn.Duplicate {
			copies++
			continue
		}
		seen[it.Turn.TurnID]++
	}
	if len(seen) != 30 || copies != 3 || page.Totals.Turns != 30 {
		t.Errorf("inspector timeline: %d distinct turns, %d copies, totals %d; want 30, 3, 30", len(seen), copies, page.Totals.Turns)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("inspector: turn %s %d times", id, n)
		}
	}
	cancel()
	if err := <-uiDone; err != nil {
		t.Errorf("processor ui: %v", err)
	}
}

// migrate refuses while a consumer has events it has not delivered, and
// changes nothing.
func TestMigrateRefusesUndrainedConsumers(t *testing.T) {
	dir := t.TempDir()
	runPhase(t, dir, 0, func(ctx context.Context, e *env) error { return publishAndCheck(ctx, e, 0, 1) })
	// Events stored while no processor runs: the consumer has them pending.
	var o options
	o.storeDir, o.embeddedPort, o.prefix, o.logLevel = dir, -1, "fold", "warn"
	e, err := openEnv(context.Background(), &o, zerolog.Nop(), false)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(e.layout.Subjects.In("s2", events.KindTurn))
	msg.Data, _ = json.Marshal(events.Turn{V: 1, Session: "s2", TurnID: "x", At: time.Now().UTC(), Speaker: "A", Role: "user", Text: "pending"})
	if _, err := e.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	e.close()
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"migrate", "--store-dir", dir, "--partitions", "2"}, &out, &errOut)
	var refused *broker.MigrateRefused
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "foldstream (1 events not delivered)") {
		t.Fatalf("migrate with a pending event: %v", err)
	}
	// Still the single-consumer layout: the processor starts on it and
	// applies the event.
	runPhase(t, dir, 0, func(ctx context.Context, e *env) error {
		b, err := client.NewBuilder(e.nc, e.js)
		if err != nil {
			return err
		}
		for {
			if info, err := b.Session(ctx, "s2"); err == nil && info.TotalTurns == 1 {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
