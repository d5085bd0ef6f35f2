package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Config is what "processor demo" passes to Run.
type Config struct {
	// Session to publish to; empty picks "demo-<unix seconds>" so that a
	// second run does not collide with the first one's turn ids, which the
	// stream would drop as duplicates.
	Session string
	// Turns to publish; 0 means 110, enough for five folds that reach the
	// trip planning in the middle of the conversation.
	Turns int
	// Interval between turns; 0 publishes as fast as acks come back.
	Interval time.Duration
	Seed     int64
	// Notes publishes the screen-watch notes between the turns.
	Notes bool
	// WaitSummaries bounds the wait for the expected summaries after the
	// last turn; 0 means 30 s.
	WaitSummaries time.Duration
	// Recent and Batch must match the processor's window settings (0 = the
	// defaults 50 and 10); they only decide how many summaries to wait for.
	Recent, Batch int
}

func (c Config) withDefaults(now time.Time) Config {
	if c.Session == "" {
		c.Session = "demo-" + strconv.FormatInt(now.Unix(), 10)
	}
	if c.Turns == 0 {
		c.Turns = 110
	}
	if c.WaitSummaries <= 0 {
		c.WaitSummaries = 30 * time.Second
	}
	if c.Recent <= 0 {
		c.Recent = 50
	}
	if c.Batch <= 0 {
		c.Batch = 10
	}
	return c
}

// ExpectedSummaries is how many folds window mode makes for turns turns:
// the first when the total exceeds recent+batch (61 with the defaults), then
// one per further batch (71, 81, …).
func ExpectedSummaries(turns, recent, batch int) int {
	first := recent + batch + 1
	if batch <= 0 || turns < first {
		return 0
	}
	return (turns-first)/batch + 1
}

// Run publishes the demo conversation to session and prints the summary
// updates and lifecycle events the processor sends back. It returns nil
// once every turn is published and the expected summaries have arrived, an
// error if they do not arrive within cfg.WaitSummaries, and the context's
// error if ctx ends first.
func Run(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, subjects events.Subjects, cfg Config, out io.Writer, log zerolog.Logger) error {
	cfg = cfg.withDefaults(time.Now())
	if err := events.CheckSession("demo session", cfg.Session); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if cfg.Turns < 0 || cfg.Interval < 0 {
		return fmt.Errorf("demo: turns (%d) and interval (%s) must not be negative", cfg.Turns, cfg.Interval)
	}
	log = log.With().Str("session", cfg.Session).Logger()
	turns := Conversation(cfg.Seed, cfg.Turns)
	var notes []events.Note
	if cfg.Notes {
		notes = Notes(cfg.Seed)
	}
	rebase(turns, notes, cfg.Session, time.Now().UTC().Truncate(time.Second))
	expected := ExpectedSummaries(len(turns), cfg.Recent, cfg.Batch)

	// Subscribe before publishing: a core subscription only sees what is
	// published after it exists, and the first fold can follow the 61st
	// turn within milliseconds.
	inbox := make(chan *nats.Msg, 4096)
	for _, kind := range []string{events.KindSummary, events.KindEvent} {
		sub, err := nc.ChanSubscribe(subjects.Out(cfg.Session, kind), inbox)
		if err != nil {
			return fmt.Errorf("demo: subscribe to %s: %w", subjects.Out(cfg.Session, kind), err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	// FlushWithContext insists on a deadline; the caller's ctx may have none.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("demo: register subscriptions: %w", err)
	}

	p := &printer{w: out, versions: map[uint64]bool{}, printed: map[uint64]bool{}}
	p.printf("demo: session %s, %d turns every %s, expecting %d summaries (window mode, recent %d, batch %d)\n",
		cfg.Session, len(turns), cfg.Interval, expected, cfg.Recent, cfg.Batch)
	log.Info().Str("event", "demo_started").Int("turns", len(turns)).Int("notes", len(notes)).
		Int("expected_summaries", expected).Dur("interval", cfg.Interval).Msg("demo bot started")

	versions := p.versions
	next, nextNote := 0, 0
	pubTimer := time.NewTimer(0)
	defer pubTimer.Stop()
	pubC := pubTimer.C
	var waitC, graceC <-chan time.Time
	// Finished once every expected summary is printed: one that arrived
	// before its fold's started event is held until that event comes, or
	// for a short grace period (a core subscription may miss it).
	finished := func() bool { return pubC == nil && len(p.printed) >= expected }

	if len(turns) == 0 {
		pubC = nil
	}
	for !finished() {
		select {
		case <-ctx.Done():
			p.flush()
			p.printf("demo: stopped after %d of %d turns and %d of %d summaries\n", next, len(turns), len(versions), expected)
			return fmt.Errorf("demo interrupted: %w", ctx.Err())

		case m := <-inbox:
			p.handle(m, log)

		case <-pubC:
			// Notes go out before the first turn that comes after them, the
			// way a bot evicts them from its live buffer as the talk goes on.
			for nextNote < len(notes) && !notes[nextNote].At.After(turns[next].At) {
				if err := publishNote(ctx, js, subjects, notes[nextNote]); err != nil {
					return err
				}
				p.printf("  [note] %s\n", notes[nextNote].Text)
				nextNote++
			}
			dup, err := publishTurn(ctx, js, subjects, turns[next])
			if err != nil {
				return err
			}
			if dup {
				if next == 0 {
					return fmt.Errorf("demo: session %s already has this conversation (turn %s was dropped as a duplicate): run with another --session or leave it empty", cfg.Session, turns[next].TurnID)
				}
				log.Warn().Str("event", "demo_duplicate_turn").Str("turn_id", turns[next].TurnID).Msg("turn dropped by the stream as a duplicate")
			}
			t := turns[next]
			p.printf("  #%-3d %s: %s\n", next, t.Speaker, t.Text)
			next++
			if next < len(turns) {
				pubTimer.Reset(cfg.Interval)
				continue
			}
			pubC = nil
			waitC = time.After(cfg.WaitSummaries)
			log.Info().Str("event", "demo_published").Int("turns", next).Int("notes", nextNote).Msg("all turns published")
			if len(versions) < expected {
				p.printf("demo: all %d turns published, waiting up to %s for %d more summaries\n", next, cfg.WaitSummaries, expected-len(versions))
			}

		case <-graceC:
			p.flush()

		case <-waitC:
			msg := fmt.Sprintf("waited %s after the last turn and got %d of %d summaries for session %s: is the processor running on subject prefix %q in window mode with recent %d and batch %d?",
				cfg.WaitSummaries, len(versions), expected, cfg.Session, subjects.Prefix, cfg.Recent, cfg.Batch)
			p.flush()
			p.printf("demo: %s\n", msg)
			log.Error().Str("event", "demo_timeout").Int("summaries", len(versions)).Int("expected", expected).Msg("summaries did not arrive")
			return errors.New("demo: " + msg)
		}
		if p.err != nil {
			return fmt.Errorf("demo: write output: %w", p.err)
		}
		if graceC == nil && pubC == nil && len(versions) >= expected && !finished() {
			graceC = time.After(2 * time.Second)
		}
	}
	// Show what is already buffered (usually the fold's completion event)
	// so the output ends with a complete story.
	for drained := false; !drained; {
		select {
		case m := <-inbox:
			p.handle(m, log)
		default:
			drained = true
		}
	}
	p.flush()
	p.printf("demo: done, %d turns and %d notes published, %d summaries received in session %s\n",
		len(turns), nextNote, len(versions), cfg.Session)
	log.Info().Str("event", "demo_done").Int("summaries", len(versions)).Msg("demo finished")
	if p.err != nil {
		return fmt.Errorf("demo: write output: %w", p.err)
	}
	return nil
}

// rebase moves the conversation to end at now and puts it in session.
// "at" near the wall clock matters: idle and daily reset policies compare it
// with the clock. It ends at now rather than starting there because the
// demo publishes faster than the conversation's pace, and the processor
// rejects an at more than --max-clock-skew ahead of when the stream stored
// the turn. Turn ids get the session as prefix because Nats-Msg-Id
// dedup is per stream, not per session: two demo sessions with bare "t0001"
// ids would drop each other's turns.
func rebase(turns []events.Turn, notes []events.Note, session string, now time.Time) {
	if len(turns) == 0 {
		return
	}
	shift := now.Sub(turns[len(turns)-1].At)
	for i := range turns {
		turns[i].Session = session
		turns[i].TurnID = session + "-" + turns[i].TurnID
		turns[i].At = turns[i].At.Add(shift)
	}
	for i := range notes {
		notes[i].Session = session
		notes[i].NoteID = session + "-" + notes[i].NoteID
		notes[i].At = notes[i].At.Add(shift)
	}
}

func publishTurn(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, t events.Turn) (duplicate bool, err error) {
	data, err := json.Marshal(t)
	if err != nil {
		return false, fmt.Errorf("demo: encode turn %s: %w", t.TurnID, err)
	}
	msg := &nats.Msg{Subject: subjects.In(t.Session, events.KindTurn), Data: data, Header: nats.Header{}}
	// turn_id is the idempotency key; as Nats-Msg-Id the stream drops a
	// re-publish itself.
	msg.Header.Set(jetstream.MsgIDHeader, t.TurnID)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("demo: publish turn %s to %s: %w", t.TurnID, msg.Subject, err)
	}
	return ack.Duplicate, nil
}

func publishNote(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, n events.Note) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("demo: encode note %s: %w", n.NoteID, err)
	}
	msg := &nats.Msg{Subject: subjects.In(n.Session, events.KindNote), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, n.NoteID)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("demo: publish note %s to %s: %w", n.NoteID, msg.Subject, err)
	}
	return nil
}

// printer writes the human output and keeps the first write error. It
// prints a fold's story in causal order: "fold started", the summary, then
// "fold completed". The processor publishes the started event and the
// summary on two connections (ingest and folds), so a fast summarizer's
// summary can reach a subscriber before the event that announced its
// fold; such a summary waits until a started event it can follow has been
// printed, and a completed event waits for its summary.
type printer struct {
	w   io.Writer
	err error
	// versions are the summary versions received, printed or held.
	versions map[uint64]bool
	// printed are the summary versions printed.
	printed map[uint64]bool
	// started counts the "fold started" events printed.
	started int
	// heldSummaries are summaries waiting for a started event, in arrival
	// order; heldCompleted are completed events waiting for their summary.
	heldSummaries []events.SummaryUpdated
	heldCompleted []events.Lifecycle
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// handle prints one outbound message, or holds it until what caused it is
// printed, and records summary versions. Each version is counted once: a
// summary re-published after a processor crash reaches core subscribers
// even when the stream drops it as a duplicate.
func (p *printer) handle(m *nats.Msg, log zerolog.Logger) {
	switch {
	case strings.HasSuffix(m.Subject, "."+events.KindSummary):
		var s events.SummaryUpdated
		if err := json.Unmarshal(m.Data, &s); err != nil {
			log.Warn().Err(err).Str("event", "demo_bad_summary").Str("subject", m.Subject).Msg("summary update does not decode")
			return
		}
		if p.versions[s.Version] {
			return
		}
		p.versions[s.Version] = true
		p.heldSummaries = append(p.heldSummaries, s)
	default:
		var e events.Lifecycle
		if err := json.Unmarshal(m.Data, &e); err != nil {
			log.Warn().Err(err).Str("event", "demo_bad_lifecycle").Str("subject", m.Subject).Msg("lifecycle event does not decode")
			return
		}
		switch e.Type {
		case events.EventCompactionStarted:
			p.started++
			p.printf("  -- %s\n", DescribeLifecycle(e))
		case events.EventCompactionCompleted:
			p.heldCompleted = append(p.heldCompleted, e)
		default:
			p.printf("  -- %s\n", DescribeLifecycle(e))
		}
	}
	p.release(false)
}

// release prints the held messages whose cause has been printed; all of
// them when all is set (the end of the demo: nothing more will come).
func (p *printer) release(all bool) {
	for len(p.heldSummaries) > 0 && (all || p.started > len(p.printed)) {
		s := p.heldSummaries[0]
		p.heldSummaries = p.heldSummaries[1:]
		p.printed[s.Version] = true
		p.printf("\n== summary v%d: turns %d..%d folded (%d turns, %d notes), cursor %d, tier %s, model %s, %d chars, %d ms\n",
			s.Version, s.Cursor-int64(s.FoldedTurns), s.CoveredThroughTurn, s.FoldedTurns, s.FoldedNotes, s.Cursor,
			s.Tier, s.Model, s.SummaryChars, s.LatencyMS)
		for _, l := range strings.Split(strings.TrimSpace(s.Summary), "\n") {
			p.printf("   | %s\n", l)
		}
		p.printf("\n")
	}
	kept := p.heldCompleted[:0]
	for _, e := range p.heldCompleted {
		if all || p.printed[e.Version] {
			p.printf("  -- %s\n", DescribeLifecycle(e))
			continue
		}
		kept = append(kept, e)
	}
	p.heldCompleted = kept
}

// flush prints whatever is still held.
func (p *printer) flush() { p.release(true) }

// DescribeLifecycle is a lifecycle event as one human line.
func DescribeLifecycle(e events.Lifecycle) string {
	switch e.Type {
	case events.EventCompactionStarted:
		return fmt.Sprintf("fold started: turns %d..%d (trigger %s, %d turns in session)", e.BatchFrom, e.BatchTo, e.Trigger, e.TotalTurns)
	case events.EventCompactionCompleted:
		return fmt.Sprintf("fold completed: cursor %d -> %d, v%d, tier %s, %d ms", e.OldCursor, e.NewCursor, e.Version, e.Tier, e.LatencyMS)
	case events.EventCompactionFailed:
		retry := "will retry"
		if e.Retryable == nil || !*e.Retryable {
			retry = "not retryable"
		}
		return fmt.Sprintf("fold FAILED: %s (%s): %s", e.ErrorClass, retry, e.Error)
	case events.EventCompactionSkipped:
		return fmt.Sprintf("fold skipped: %s (cursor %d, %d turns)", e.Reason, e.Cursor, e.TotalTurns)
	case events.EventRejected:
		return fmt.Sprintf("event rejected (%s): %s; kept on the dead-letter stream (processor dlq)", e.Reason, e.Error)
	}
	if e.Reason != "" {
		return e.Type + ": " + e.Reason
	}
	return e.Type
}
