package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/foldstream/foldstream/internal/demo"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
)

// runTail follows a session's outbound events (summaries, lifecycle
// events, memories, evictions) from the outbound stream, in stream order,
// until interrupted or --count events were printed.
func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newClientFlagSet("processor tail", &o)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id to follow (required)")
	all := fs.Bool("all", false, "print the session's outbound history first, then follow (default: only new events)")
	asJSON := fs.Bool("json", false, `JSON lines: {"seq","subject","kind","event"} with the event as published`)
	count := fs.Int("count", 0, "exit after this many events (0 = follow until interrupted)")
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	if *session == "" {
		return errors.New("session: required, the session id to follow (processor tail S, or --session S)")
	}
	if err := events.CheckSession("--session", *session); err != nil {
		return err
	}
	if *count < 0 {
		return fmt.Errorf("--count: expected 0 (follow) or more, got %d", *count)
	}
	t, err := openTool(&o, stderr, "tail")
	if err != nil {
		return err
	}
	defer t.close()
	policy := jetstream.DeliverNewPolicy
	if *all {
		policy = jetstream.DeliverAllPolicy
	}
	subj := t.layout.Subjects
	// An ordered consumer: in stream order, recreated after a disconnect
	// without a gap or a repeat, and nothing left behind on the server.
	cons, err := t.js.OrderedConsumer(ctx, t.layout.Out, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj.OutSession(*session)}, DeliverPolicy: policy,
	})
	if err != nil {
		return fmt.Errorf("follow %s on stream %s: %w", subj.OutSession(*session), t.layout.Out, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("follow %s: %w", subj.OutSession(*session), err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	if !*asJSON {
		fmt.Fprintf(stdout, "following %s on stream %s (Ctrl-C stops)\n", subj.OutSession(*session), t.layout.Out)
	}
	for n := 0; *count == 0 || n < *count; n++ {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("follow %s: %w", subj.OutSession(*session), err)
		}
		_, kind, _ := subj.ParseOut(msg.Subject())
		meta, _ := msg.Metadata()
		var seq uint64
		if meta != nil {
			seq = meta.Sequence.Stream
		}
		if *asJSON {
			ev := json.RawMessage(msg.Data())
			if !json.Valid(ev) {
				ev, _ = json.Marshal(string(msg.Data()))
			}
			if err := printJSON(stdout, struct {
				Seq     uint64          `json:"seq"`
				Subject string          `json:"subject"`
				Kind    string          `json:"kind"`
				Event   json.RawMessage `json:"event"`
			}{seq, msg.Subject(), kind, ev}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(stdout, describeOut(kind, msg.Data()))
	}
	return nil
}

// describeOut renders one outbound event for people.
func describeOut(kind string, data []byte) string {
	bad := func(err error) string { return fmt.Sprintf("[%s] undecodable: %v: %s", kind, err, data) }
	switch kind {
	case events.KindSummary:
		var s events.SummaryUpdated
		if err := json.Unmarshal(data, &s); err != nil {
			return bad(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s == summary v%d: cursor %d, %d turns and %d notes folded, mode %s, tier %s, model %s, %d chars",
			s.At.Format("15:04:05"), s.Version, s.Cursor, s.FoldedTurns, s.FoldedNotes, s.Mode, s.Tier, s.Model, s.SummaryChars)
		for _, l := range strings.Split(strings.TrimSpace(s.Summary), "\n") {
			b.WriteString("\n   | " + l)
		}
		return b.String()
	case events.KindEvent:
		var e events.Lifecycle
		if err := json.Unmarshal(data, &e); err != nil {
			return bad(err)
		}
		return fmt.Sprintf("%s -- %s", e.At.Format("15:04:05"), demo.DescribeLifecycle(e))
	case events.KindMemory:
		var m events.Memories
		if err := json.Unmarshal(data, &m); err != nil {
			return bad(err)
		}
		return fmt.Sprintf("%s memories of v%d: %s", m.At.Format("15:04:05"), m.Version, strings.Join(m.Memories, "; "))
	case events.KindEvicted:
		var e events.Evicted
		if err := json.Unmarshal(data, &e); err != nil {
			return bad(err)
		}
		return fmt.Sprintf("%s evicted turns %d..%d (%d turns, %d tokens), cursor %d: %s", e.At.Format("15:04:05"), e.FromTurn, e.ToTurn, e.Count, e.Tokens, e.Cursor, e.Note)
	}
	return fmt.Sprintf("[%s] %s", kind, data)
}
