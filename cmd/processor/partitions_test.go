package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// `processor run --partitions 4` provisions the partitioned stream, claims
// every partition as the only member, folds, and releases them all when
// it stops.
func TestRunPartitioned(t *testing.T) {
	var o options
	fs := newFlagSet("run", &o)
	args := []string{"--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "", "--summarizer", "offline",
		"--tokenizer", "heuristic", "--partitions", "4", "--partition-ttl", "2s", "--instance-id", "solo"}
	if err := parseOptions(fs, &o, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	folded := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, &o, zerolog.New(&logs).Level(zerolog.InfoLevel), func(e *env) {
			if err := publishUntilFolded(e, "s1"); err != nil {
				folded <- err
				return
			}
			folded <- contextHasTail(e, "s1")
		})
	}()
	select {
	case err := <-folded:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("serve returned early: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no fold\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	out := logs.String()
	for ev, n := range map[string]int{"partition_claimed": 4, "partition_released": 4, "partition_member_left": 1} {
		if got := strings.Count(out, `"event":"`+ev+`"`); got != n {
			t.Errorf("%d %s in logs, want %d", got, ev, n)
		}
	}
}

func publishUntilFolded(e *env, session string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 61 {
		data, _ := json.Marshal(events.Turn{V: 1, Session: session, TurnID: fmt.Sprintf("%s-%d", session, i),
			At: time.Now().UTC(), Speaker: "Alice", Role: "user", Text: fmt.Sprintf("we should queue ranked tonight, number %d", i)})
		if _, err := e.js.Publish(ctx, e.layout.Subjects.In(session, events.KindTurn), data); err != nil {
			return err
		}
	}
	out, err := e.js.Stream(ctx, e.layout.Out)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		if _, err := out.GetLastMsgForSubject(ctx, e.layout.Subjects.Out(session, events.KindSummary)); err == nil {
			return nil
		} else if err != jetstream.ErrMsgNotFound {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ctx.Err()
}

// contextHasTail publishes one more turn and asks the context service
// for the session at once: the reply reads the partitioned stream, so the
// new turn is there whether the processor has checkpointed it or not.
func contextHasTail(e *env, session string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, _ := json.Marshal(events.Turn{V: 1, Session: session, TurnID: session + "-tail", At: time.Now().UTC(),
		Speaker: "Bob", Role: "user", Text: "the tail turn"})
	if _, err := e.js.Publish(ctx, e.layout.Subjects.In(session, events.KindTurn), data); err != nil {
		return err
	}
	b, err := client.NewBuilder(e.nc, e.js, client.RequestTimeout(5*time.Second))
	if err != nil {
		return err
	}
	c, err := b.Context(ctx, session, client.Budget{})
	if err != nil {
		return err
	}
	if len(c.Turns) == 0 || c.Turns[len(c.Turns)-1].Text != "the tail turn" || c.TotalTurns != 62 {
		return fmt.Errorf("context of %s: %d turns in all, %d verbatim, not ending with the tail turn", session, c.TotalTurns, len(c.Turns))
	}
	return nil
}

func TestPartitionSettingsAreValidated(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "-1"}, "--partitions"},
		{[]string{"--partitions", "4", "--instance-id", "a.b"}, "--instance-id"},
		{[]string{"--partitions", "4", "--partition-ttl", "1ms"}, "--partition-ttl"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"run", "--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", ""}, c.args...)
		err := run(context.Background(), args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
}
