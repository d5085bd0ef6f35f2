package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// deadLetter is one message of the dead-letter stream: a rejected inbound
// event as the bot sent it, with the processor's reason in headers.
type deadLetter struct {
	Seq             uint64    `json:"seq"`
	Time            time.Time `json:"time"`
	Subject         string    `json:"subject"`
	OriginalSubject string    `json:"original_subject"`
	OriginalSeq     uint64    `json:"original_seq"`
	OriginalStream  string    `json:"original_stream,omitempty"`
	OriginalMsgID   string    `json:"original_msg_id,omitempty"`
	// Reference says the dead letter is not a copy: the message was too
	// large or refused for the dead-letter stream, so Payload is only its
	// start, and the whole of it is in OriginalStream at OriginalSeq.
	Reference bool            `json:"reference,omitempty"`
	Code      string          `json:"code"`
	Field     string          `json:"field,omitempty"`
	Error     string          `json:"error"`
	Payload   json.RawMessage `json:"payload"`

	data   []byte
	header nats.Header
}

// runDLQ lists the dead-letter stream, or with "redrive" publishes its
// events again.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "redrive" {
		return runRedrive(ctx, args[1:], stdout, stderr)
	}
	var o options
	fs := newClientFlagSet("processor dlq", &o)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: processor dlq [flags]            list rejected inbound events with their error code and field
       processor dlq redrive [flags]    publish them again after a fix (processor dlq redrive -h)
`)
		fs.PrintDefaults()
	}
	session := fs.String("session", "", "only this session's rejected events (default: every session's)")
	asJSON := fs.Bool("json", false, `JSON lines: {"seq","time","subject","original_subject","original_seq","original_stream","original_msg_id","reference","code","field","error","payload"}`)
	full := fs.Bool("full-payload", false, "print whole payloads instead of their first 100 characters")
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	t, err := openTool(&o, stderr, "dlq")
	if err != nil {
		return err
	}
	defer t.close()
	dls, err := t.deadLetters(ctx, *session)
	if err != nil {
		return err
	}
	if *asJSON {
		for _, d := range dls {
			if err := printJSON(stdout, d); err != nil {
				return err
			}
		}
		return nil
	}
	if len(dls) == 0 {
		fmt.Fprintf(stdout, "no rejected events in stream %s\n", t.layout.DLQ)
		return nil
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tTIME\tSUBJECT\tCODE\tFIELD\tERROR\tPAYLOAD")
	for _, d := range dls {
		payload := string(d.data)
		if !*full && utf8.RuneCountInString(payload) > 100 {
			payload = string([]rune(payload)[:100]) + "…"
		}
		field := d.Field
		if field == "" {
			field = "-"
		}
		if d.Reference {
			payload = fmt.Sprintf("(a reference: the %s bytes are in %s at %d) %s", d.header.Get(events.HeaderOriginalSize), d.OriginalStream, d.OriginalSeq, payload)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Seq, d.Time.UTC().Format(time.RFC3339), d.OriginalSubject, d.Code, field,
			oneLine(d.Error), oneLine(payload))
	}
	fmt.Fprintf(w, "%d rejected events; after fixing what they name, publish them again with: processor dlq redrive\n", len(dls))
	return w.Flush()
}

// original reads the payload of a dead letter kept as a reference from
// the stream and sequence it names.
func (t *tool) original(ctx context.Context, d deadLetter) ([]byte, error) {
	stream := d.OriginalStream
	if stream == "" {
		stream = t.layout.In
	}
	s, err := t.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("a reference to %s seq %d: %w", stream, d.OriginalSeq, err)
	}
	m, err := s.GetMsg(ctx, d.OriginalSeq)
	if err != nil {
		return nil, fmt.Errorf("a reference to %s seq %d, which cannot be read (removed by max-age?): %w", stream, d.OriginalSeq, err)
	}
	return m.Data, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// deadLetters reads the dead-letter stream, oldest first: one session's
// subject, or all of them.
func (t *tool) deadLetters(ctx context.Context, session string) ([]deadLetter, error) {
	filter := t.layout.Subjects.DeadLetterAll()
	if session != "" {
		if err := events.CheckSession("--session", session); err != nil {
			return nil, err
		}
		filter = t.layout.Subjects.DeadLetter(session)
	}
	s, err := t.js.Stream(ctx, t.layout.DLQ)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w (has a processor with --prefix %s run on this server?)", t.layout.DLQ, err, t.layout.Subjects.Prefix)
	}
	var out []deadLetter
	for next := uint64(1); ; {
		m, err := s.GetMsg(ctx, next, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading stream %s after sequence %d: %w", t.layout.DLQ, next-1, err)
		}
		next = m.Sequence + 1
		d := deadLetter{
			Seq: m.Sequence, Time: m.Time, Subject: m.Subject, data: m.Data, header: m.Header,
			OriginalSubject: m.Header.Get(events.HeaderOriginalSubject), OriginalMsgID: m.Header.Get(events.HeaderOriginalMsgID),
			OriginalStream: m.Header.Get(events.HeaderOriginalStream), Reference: m.Header.Get(events.HeaderDeadLetter) == "reference",
			Code: m.Header.Get(events.HeaderErrorCode), Field: m.Header.Get(events.HeaderErrorField), Error: m.Header.Get(events.HeaderError),
		}
		d.OriginalSeq, _ = strconv.ParseUint(m.Header.Get(events.HeaderOriginalSeq), 10, 64)
		if json.Valid(m.Data) {
			d.Payload = m.Data
		} else {
			d.Payload, _ = json.Marshal(string(m.Data))
		}
		out = append(out, d)
	}
}

// runRedrive publishes rejected events again to the subject they were
// published to, as they were sent, after the cause was fixed (a session
// reset after session_ended, a larger limit after oversized, ...). An
// event that is still wrong is rejected again and lands here again.
//
// No duplicates: each redrive carries Nats-Msg-Id redrive:<original
// inbound sequence>, the same for every redrive of one dead letter, so
// the inbound stream stores it once within its duplicate window; a turn
// is also deduplicated by the processor by its turn_id; and a dead letter
// that was redriven is deleted from the dead-letter stream (unless
// --keep), so the next redrive does not find it. The rejected message's
// own Nats-Msg-Id cannot be reused: the stream accepted that message
// before the processor rejected it, and would drop the redrive as its
// duplicate for the whole window.
func runRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newClientFlagSet("processor dlq redrive", &o)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "only this session's rejected events (default: every session's)")
	seq := fs.Uint64("seq", 0, "only the dead letter with this sequence (the SEQ column of processor dlq)")
	code := fs.String("code", "", "only dead letters with this error code, e.g. session_ended, oversized")
	keep := fs.Bool("keep", false, "keep the dead letters after publishing them again (default: delete each once its event is stored)")
	dryRun := fs.Bool("dry-run", false, "print what would be published, publish nothing")
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	t, err := openTool(&o, stderr, "dlq-redrive")
	if err != nil {
		return err
	}
	defer t.close()
	dls, err := t.deadLetters(ctx, *session)
	if err != nil {
		return err
	}
	dlq, err := t.js.Stream(ctx, t.layout.DLQ)
	if err != nil {
		return fmt.Errorf("dead-letter stream %s: %w", t.layout.DLQ, err)
	}
	var done, skipped int
	for _, d := range dls {
		if *seq != 0 && d.Seq != *seq || *code != "" && d.Code != *code {
			continue
		}
		if d.OriginalSubject == "" || d.OriginalSeq == 0 {
			fmt.Fprintf(stdout, "dlq #%d: skipped: no %s or %s header to redrive it by\n", d.Seq, events.HeaderOriginalSubject, events.HeaderOriginalSeq)
			skipped++
			continue
		}
		msgID := "redrive:" + strconv.FormatUint(d.OriginalSeq, 10)
		if *dryRun {
			fmt.Fprintf(stdout, "dlq #%d (%s): would publish to %s with Nats-Msg-Id %s\n", d.Seq, d.Code, d.OriginalSubject, msgID)
			continue
		}
		data := d.data
		if d.Reference {
			// Only the start of the payload is here; the whole of it
			// stays in the inbound stream.
			if data, err = t.original(ctx, d); err != nil {
				fmt.Fprintf(stdout, "dlq #%d: skipped: %v\n", d.Seq, err)
				skipped++
				continue
			}
		}
		msg := nats.NewMsg(d.OriginalSubject)
		msg.Data = data
		for k, v := range d.header {
			if strings.HasPrefix(k, "Foldstream-") || strings.HasPrefix(k, "Nats-") {
				continue // the processor's reason, and JetStream's own headers (expectations, ids)
			}
			msg.Header[k] = v
		}
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
		ack, err := t.js.PublishMsg(ctx, msg)
		if err != nil {
			return fmt.Errorf("dlq #%d: publish to %s: %w (%d redriven before it)", d.Seq, d.OriginalSubject, err, done)
		}
		what := fmt.Sprintf("stored as inbound seq %d", ack.Sequence)
		if ack.Duplicate {
			what = "already redriven (the stream dropped it as a duplicate)"
		}
		if !*keep {
			if err := dlq.DeleteMsg(ctx, d.Seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("dlq #%d: published, but not deleted from %s: %w (a second redrive is dropped as a duplicate within the stream's duplicate window)", d.Seq, t.layout.DLQ, err)
			}
		}
		fmt.Fprintf(stdout, "dlq #%d (%s) → %s: %s\n", d.Seq, d.Code, d.OriginalSubject, what)
		done++
	}
	switch {
	case *dryRun:
	case done == 0 && skipped == 0:
		fmt.Fprintln(stdout, "nothing to redrive")
	default:
		fmt.Fprintf(stdout, "%d redriven; the processor applies them in order, or rejects them again (processor dlq)\n", done)
	}
	if skipped > 0 {
		return fmt.Errorf("%d dead letters could not be redriven", skipped)
	}
	return nil
}
