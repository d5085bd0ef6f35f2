package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nuid"
)

// runPub publishes inbound events the way a bot does, through the Go
// client: validated before they are sent (an error names the field), turns
// and notes with their Nats-Msg-Id (<session>:<turn_id>,
// <session>:note:<note_id>) so that publishing one twice stores it once.
// One event from flags, or JSON lines from stdin.
func runPub(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pub(ctx, args, os.Stdin, stdout, stderr)
}

func pub(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o options
	fs := newClientFlagSet("processor pub", &o)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: processor pub --session S (--turn TEXT --speaker NAME | --note TEXT | --control OP) [flags]
       processor pub [--session S] < events.jsonl
Publishes one turn, note or control event from flags; with none of --turn, --note or --control it
reads JSON lines from stdin, one event per line: a turn (has "turn_id"), a note ("note_id") or a
control ("op"), or any of them with "kind":"turn"|"note"|"control". "v" and "at" default to 1 and
now, "session" to --session.
`)
		fs.PrintDefaults()
	}
	session := fs.String("session", "", "session id (for JSON lines: the default of lines without one)")
	turn := fs.String("turn", "", "publish a turn with this text")
	speaker := fs.String("speaker", "", "the turn's speaker (required with --turn)")
	role := fs.String("role", "user", "the turn's role: user, assistant, system or tool")
	turnID := fs.String("turn-id", "", "the turn's id, its idempotency key (default: a new unique id)")
	kind := fs.String("kind", "", "the turn's kind, e.g. speech, chat, tool_call, tool_result")
	toolName := fs.String("tool", "", "the tool of a tool_call or tool_result turn")
	tokens := fs.Int("tokens", 0, "the turn's own token count, if known")
	note := fs.String("note", "", "publish a screen-watch note with this text")
	noteID := fs.String("note-id", "", "the note's id (default: a new unique id)")
	source := fs.String("source", "", "the note's source, e.g. screen")
	control := fs.String("control", "", "publish a control event: compact, end, reset, generate or configure")
	sessionConfig := fs.String("session-config", "", `with --control configure: the session's settings as JSON, e.g. '{"mode":"tokens","context_window":32000}'`)
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	flagged := 0
	for _, s := range []string{*turn, *note, *control} {
		if s != "" {
			flagged++
		}
	}
	if flagged > 1 {
		return errors.New("--turn, --note and --control: expected one of them per call (or none, to read JSON lines from stdin)")
	}
	if *sessionConfig != "" && *control != client.OpConfigure {
		return errors.New("--session-config: only with --control configure")
	}
	if flagged == 1 {
		if err := events.CheckSession("--session", *session); err != nil {
			return err
		}
	}
	t, err := openTool(&o, stderr, "pub")
	if err != nil {
		return err
	}
	defer t.close()
	p, err := client.NewPublisher(t.js, client.Prefix(o.prefix))
	if err != nil {
		return err
	}
	defer func() { _ = p.Close(context.WithoutCancel(ctx)) }()
	subj := t.layout.Subjects
	switch {
	case *turn != "":
		id := *turnID
		if id == "" {
			id = "cli-" + nuid.Next()
		}
		ev := client.Turn{Session: *session, TurnID: id, Speaker: *speaker, Role: *role, Text: *turn, Kind: *kind, Tool: *toolName, Tokens: *tokens}
		if err := p.PublishTurn(ctx, ev); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published turn %s to %s (Nats-Msg-Id %s)\n", id, subj.In(*session, events.KindTurn), client.TurnMsgID(*session, id))
		return nil
	case *note != "":
		id := *noteID
		if id == "" {
			id = "cli-" + nuid.Next()
		}
		if err := p.PublishNote(ctx, client.Note{Session: *session, NoteID: id, Source: *source, Text: *note}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published note %s to %s (Nats-Msg-Id %s)\n", id, subj.In(*session, events.KindNote), client.NoteMsgID(*session, id))
		return nil
	case *control != "":
		var cfg *client.SessionConfig
		if *sessionConfig != "" {
			cfg = new(client.SessionConfig)
			dec := json.NewDecoder(bytes.NewReader([]byte(*sessionConfig)))
			if err := dec.Decode(cfg); err != nil {
				if ve, ok := events.AsValidation(fieldError("config.", err)); ok {
					return fmt.Errorf("--session-config: %w", ve)
				}
				return fmt.Errorf("--session-config: expected a JSON object of session settings: %w", err)
			}
		}
		if err := p.Control(ctx, *session, *control, cfg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published control %s to %s\n", *control, subj.In(*session, events.KindControl))
		return nil
	}
	return pubLines(ctx, p, subj, *session, stdin, stdout)
}

// pubLines publishes one event per line of r. A line that cannot be
// published is reported with its number and the others are still sent;
// the error at the end counts them.
func pubLines(ctx context.Context, p *client.Publisher, subj events.Subjects, session string, r io.Reader, stdout io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	var n, failed int
	var firstErr error
	fail := func(line int, err error) {
		failed++
		fmt.Fprintf(stdout, "line %d: not published: %v\n", line, err)
		if firstErr == nil {
			firstErr = fmt.Errorf("line %d: %w", line, err)
		}
	}
	for line := 1; sc.Scan(); line++ {
		data := bytes.TrimSpace(sc.Bytes())
		if len(data) == 0 || data[0] == '#' {
			continue
		}
		n++
		if err := pubLine(ctx, p, subj, session, data, stdout); err != nil {
			fail(line, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if n == 0 {
		return errors.New("nothing to publish: give --turn, --note or --control, or JSON lines on stdin (processor pub -h)")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d events not published; the first: %w", failed, n, firstErr)
	}
	return nil
}

func pubLine(ctx context.Context, p *client.Publisher, subj events.Subjects, session string, data []byte, stdout io.Writer) error {
	var probe struct {
		Kind    string          `json:"kind"`
		Session string          `json:"session"`
		TurnID  json.RawMessage `json:"turn_id"`
		NoteID  json.RawMessage `json:"note_id"`
		Op      json.RawMessage `json:"op"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("expected a JSON object (a turn, note or control event): %w", err)
	}
	kind := probe.Kind
	switch {
	case kind == events.KindTurn || kind == events.KindNote || kind == events.KindControl:
	case kind != "" && probe.TurnID == nil:
		return fmt.Errorf("field \"kind\": expected turn, note or control, got %q", kind)
	case probe.TurnID != nil:
		kind = events.KindTurn // "kind" of a turn is its own field (speech, chat, tool_call, ...)
	case probe.NoteID != nil:
		kind = events.KindNote
	case probe.Op != nil:
		kind = events.KindControl
	default:
		return errors.New(`expected a turn (with "turn_id"), a note ("note_id") or a control event ("op")`)
	}
	s := probe.Session
	if s == "" {
		s = session
	}
	switch kind {
	case events.KindTurn:
		var t client.Turn
		if err := json.Unmarshal(data, &t); err != nil {
			return fmt.Errorf("turn: %w", fieldError("", err))
		}
		if probe.Kind == events.KindTurn {
			t.Kind = ""
		}
		t.Session = s
		if err := p.PublishTurn(ctx, t); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published turn %s to %s (Nats-Msg-Id %s)\n", t.TurnID, subj.In(s, events.KindTurn), client.TurnMsgID(s, t.TurnID))
	case events.KindNote:
		var n client.Note
		if err := json.Unmarshal(data, &n); err != nil {
			return fmt.Errorf("note: %w", fieldError("", err))
		}
		n.Session = s
		if err := p.PublishNote(ctx, n); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published note %s to %s (Nats-Msg-Id %s)\n", n.NoteID, subj.In(s, events.KindNote), client.NoteMsgID(s, n.NoteID))
	default:
		var c client.Control
		if err := json.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("control: %w", fieldError("", err))
		}
		if err := p.Control(ctx, s, c.Op, c.Config); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published control %s to %s\n", c.Op, subj.In(s, events.KindControl))
	}
	return nil
}

// fieldError names the field of a JSON value that did not decode, and what
// was expected, as the processor's dead letter of the same event does
// (events.DecodeError); prefix is the path of the object decoded
// ("config." for --session-config). Other errors are returned as they are.
func fieldError(prefix string, err error) error {
	if ve := events.DecodeError(err); ve != nil {
		ve.Field = prefix + ve.Field
		return ve
	}
	return err
}
