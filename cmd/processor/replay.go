package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/replay"
	"github.com/foldstream/foldstream/internal/state"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("processor replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id to replay (required)")
	asJSON := fs.Bool("json", false, "JSON Lines output for machines")
	showText := fs.Bool("full-text", false, "print whole turn texts instead of the first 120 characters")
	showState := fs.Bool("state", false, "after the timeline, print the summarizer's state from the session's checkpoint (the offline summarizer's statements, periods, memories' facts and per-speaker facts), decoded; it holds what was said")
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
		err = tl.WriteJSON(stdout)
	} else {
		err = tl.WriteText(stdout, *showText)
	}
	if err != nil || !*showState {
		return err
	}
	return writeSummaryState(ctx, e, *session, *asJSON, stdout)
}

// summaryStateLine is the JSON Lines object replay --state --json writes
// after the totals.
type summaryStateLine struct {
	Kind    string          `json:"kind"` // always "summary_state"
	Session string          `json:"session"`
	Bytes   int             `json:"bytes"`
	State   json.RawMessage `json:"state,omitempty"`  // the state, when it is JSON
	Base64  []byte          `json:"base64,omitempty"` // else its bytes
	Note    string          `json:"note,omitempty"`   // why there is none
}

// writeSummaryState prints the summarizer's state kept beside the summary
// in the session's checkpoint: indented JSON (the offline summarizer's
// state is JSON), or base64 when a backend keeps something else.
func writeSummaryState(ctx context.Context, e *env, session string, asJSON bool, w io.Writer) error {
	line := summaryStateLine{Kind: "summary_state", Session: session}
	kv, err := e.js.KeyValue(ctx, e.layout.Bucket)
	if err != nil {
		return fmt.Errorf("checkpoint bucket %s: %w", e.layout.Bucket, err)
	}
	switch ent, err := kv.Get(ctx, session); {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		line.Note = "no checkpoint (the session was never folded, or it ended and was cleared)"
	case err != nil:
		return fmt.Errorf("checkpoint of %q: %w", session, err)
	default:
		cp, err := state.Decode(session, ent.Value())
		if err != nil {
			return fmt.Errorf("checkpoint of %q does not decode: %w", session, err)
		}
		line.Bytes = len(cp.SummaryState)
		switch {
		case len(cp.SummaryState) == 0:
			line.Note = "none (the summarizer keeps no state, or the session has not been folded)"
		case json.Valid(cp.SummaryState):
			line.State = cp.SummaryState
		default:
			line.Base64 = cp.SummaryState
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(&line)
	}
	var b bytes.Buffer
	switch {
	case line.Note != "":
		b.WriteString("summarizer state: " + line.Note + "\n")
	case line.State != nil:
		fmt.Fprintf(&b, "summarizer state (%d bytes):\n", line.Bytes)
		if err := json.Indent(&b, line.State, "  ", "  "); err != nil {
			return err
		}
		b.WriteString("\n")
	default:
		fmt.Fprintf(&b, "summarizer state (%d bytes, not JSON, base64):\n  %s\n", line.Bytes, base64.StdEncoding.EncodeToString(line.Base64))
	}
	_, err = w.Write(b.Bytes())
	return err
}
