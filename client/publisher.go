package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrClosed is returned by a Publisher after Close.
var ErrClosed = errors.New("foldstream client: publisher closed")

// PublishError is an asynchronous publish that the stream did not
// acknowledge: the turn may not be stored, so publish it again (its
// Nats-Msg-Id makes that safe).
type PublishError struct {
	Session string
	TurnID  string
	Subject string
	Err     error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("foldstream client: turn %q of session %s not acknowledged on %s: %v", e.TurnID, e.Session, e.Subject, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// Publisher is the bot's side: it validates events and publishes them to
// the inbound stream. It is safe for concurrent use.
type Publisher struct {
	js  jetstream.JetStream
	cfg config

	// slots holds one token per outstanding async publish: acquiring one is
	// the back-pressure.
	slots   chan struct{}
	pending chan asyncPub
	errs    chan error
	done    chan struct{}

	flushMu sync.Mutex // one Flush at a time, or two could each hold half the slots

	// closeMu is held for reading from the closed check of an async publish
	// until its future is handed to the collector, so Close can never close
	// pending under a publish in progress.
	closeMu sync.RWMutex
	closed  bool

	mu       sync.Mutex
	failed   int   // async failures since the last Flush
	firstErr error // the first of them
}

type asyncPub struct {
	f       jetstream.PubAckFuture
	session string
	turnID  string
	subject string
}

// NewPublisher returns a Publisher that publishes through js. Options:
// Prefix, MaxPending, AckTimeout, OnError, WithLimits, InboxPrefix. Call Close when
// done: it waits for outstanding acknowledgements and stops the goroutine
// that collects them.
func NewPublisher(js jetstream.JetStream, opts ...Option) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("foldstream client: NewPublisher needs a JetStream context")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkConn(js.Conn()); err != nil {
		return nil, err
	}
	p := &Publisher{
		js: js, cfg: cfg,
		slots:   make(chan struct{}, cfg.maxPending),
		pending: make(chan asyncPub, cfg.maxPending),
		errs:    make(chan error, 64),
		done:    make(chan struct{}),
	}
	go p.collect()
	return p, nil
}

// TurnMsgID is the Nats-Msg-Id of a turn: "<session>:<turn_id>". The
// stream's duplicate window is per stream, not per session, so the session
// is part of the id.
func TurnMsgID(session, turnID string) string { return session + ":" + turnID }

// NoteMsgID is the Nats-Msg-Id of a note: "<session>:note:<note_id>".
func NoteMsgID(session, noteID string) string { return session + ":note:" + noteID }

// prepareTurn fills the defaults, validates like the processor and
// encodes: an invalid turn never reaches the wire.
func (p *Publisher) prepareTurn(t Turn) (*nats.Msg, error) {
	if t.V == 0 {
		t.V = WireVersion
	}
	if t.At.IsZero() {
		t.At = p.cfg.now().UTC()
	}
	if err := events.CheckSession("session", t.Session); err != nil {
		return nil, fmt.Errorf("foldstream client: turn not published: %w", err)
	}
	if err := t.Validate(t.Session, p.cfg.limits); err != nil {
		return nil, fmt.Errorf("foldstream client: turn %q of session %s not published: %w", t.TurnID, t.Session, err)
	}
	return p.encode(p.cfg.subjects.In(t.Session, events.KindTurn), TurnMsgID(t.Session, t.TurnID), t)
}

func (p *Publisher) encode(subject, msgID string, v any) (*nats.Msg, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("foldstream client: encode event for %s: %w", subject, err)
	}
	// The processor checks the whole payload too; say so here instead of
	// letting the message land on the dead-letter stream.
	lim := p.cfg.limits
	if lim.MaxPayloadBytes == 0 {
		lim.MaxPayloadBytes = events.DefaultLimits().MaxPayloadBytes
	}
	if len(data) > lim.MaxPayloadBytes {
		return nil, fmt.Errorf("foldstream client: event for %s not published: %w", subject,
			&ValidationError{Code: CodeOversized, Field: "payload", Reason: fmt.Sprintf("%d bytes, expected at most %d", len(data), lim.MaxPayloadBytes)})
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	if msgID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	return msg, nil
}

func (p *Publisher) isClosed() bool {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	return p.closed
}

// PublishTurn validates t and publishes it, waiting for the stream's
// acknowledgement. V defaults to 1 and At to now. A turn already stored
// (same session and turn_id, within the stream's duplicate window) is
// acknowledged as a duplicate and not stored again, which is not an error.
func (p *Publisher) PublishTurn(ctx context.Context, t Turn) error {
	if p.isClosed() {
		return ErrClosed
	}
	msg, err := p.prepareTurn(t)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("foldstream client: publish turn %q of session %s: %w", t.TurnID, t.Session, err)
	}
	return nil
}

// PublishTurnAsync validates t (a validation error is returned at once and
// nothing is sent) and publishes it without waiting for the
// acknowledgement. It blocks while MaxPending publishes are outstanding. A
// publish that is not acknowledged is reported as a *PublishError to the
// OnError handler or on Errors(), and counted in the next Flush.
func (p *Publisher) PublishTurnAsync(t Turn) error {
	msg, err := p.prepareTurn(t)
	if err != nil {
		return err
	}
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	// The back-pressure: wait for a free slot. The collector frees slots
	// without taking closeMu, so waiting here under the read lock is safe.
	p.slots <- struct{}{}
	f, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		<-p.slots
		return fmt.Errorf("foldstream client: publish turn %q of session %s: %w", t.TurnID, t.Session, err)
	}
	p.pending <- asyncPub{f: f, session: t.Session, turnID: t.TurnID, subject: msg.Subject}
	return nil
}

// collect waits for the acknowledgements of async publishes in order and
// frees their slots. One goroutine for all of them: acks arrive roughly in
// publish order, so waiting in order delays a slot only briefly.
func (p *Publisher) collect() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for ap := range p.pending {
		timer.Reset(p.cfg.ackTimeout)
		var err error
		select {
		case <-ap.f.Ok():
		case err = <-ap.f.Err():
		case <-timer.C:
			err = fmt.Errorf("no acknowledgement within %s", p.cfg.ackTimeout)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if err != nil {
			p.report(&PublishError{Session: ap.session, TurnID: ap.turnID, Subject: ap.subject, Err: err})
		}
		<-p.slots
	}
	close(p.errs)
	close(p.done)
}

func (p *Publisher) report(err error) {
	p.mu.Lock()
	p.failed++
	if p.firstErr == nil {
		p.firstErr = err
	}
	p.mu.Unlock()
	if p.cfg.onError != nil {
		p.cfg.onError(err)
		return
	}
	// Never block acknowledgements on a reader that went away: an error
	// that does not fit is still counted and returned by Flush.
	select {
	case p.errs <- err:
	default:
	}
}

// Errors delivers failed asynchronous publishes (each a *PublishError)
// when no OnError handler is set. It is buffered; errors that do not fit
// are not delivered here but still counted by Flush. It is closed by Close.
func (p *Publisher) Errors() <-chan error { return p.errs }

// Flush waits until every asynchronous publish made before it has been
// acknowledged or has failed, and returns an error if any failed since the
// previous Flush.
func (p *Publisher) Flush(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	// Taking every slot means no publish is outstanding; new async
	// publishes wait until Flush returns.
	taken := 0
	defer func() {
		for range taken {
			<-p.slots
		}
	}()
	for taken < cap(p.slots) {
		select {
		case p.slots <- struct{}{}:
			taken++
		case <-ctx.Done():
			return fmt.Errorf("foldstream client: flush: %d publishes still outstanding: %w", cap(p.slots)-taken, ctx.Err())
		}
	}
	p.mu.Lock()
	n, first := p.failed, p.firstErr
	p.failed, p.firstErr = 0, nil
	p.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("foldstream client: %d asynchronous publishes failed since the last flush; the first: %w", n, first)
	}
	return nil
}

// Close flushes outstanding publishes and stops the Publisher; it does not
// close the NATS connection.
func (p *Publisher) Close(ctx context.Context) error {
	p.closeMu.Lock()
	if p.closed {
		p.closeMu.Unlock()
		return nil
	}
	p.closed = true
	p.closeMu.Unlock()
	err := p.Flush(ctx)
	close(p.pending)
	select {
	case <-p.done:
	case <-ctx.Done():
		// The collector still finishes in the background, within
		// AckTimeout per outstanding publish.
		if err == nil {
			err = fmt.Errorf("foldstream client: close: %w", ctx.Err())
		}
	}
	return err
}

// PublishNote validates n and publishes it, waiting for the acknowledgement.
// V defaults to 1 and At to now; Nats-Msg-Id is NoteMsgID.
func (p *Publisher) PublishNote(ctx context.Context, n Note) error {
	if p.isClosed() {
		return ErrClosed
	}
	if n.V == 0 {
		n.V = WireVersion
	}
	if n.At.IsZero() {
		n.At = p.cfg.now().UTC()
	}
	if err := events.CheckSession("session", n.Session); err != nil {
		return fmt.Errorf("foldstream client: note not published: %w", err)
	}
	if err := n.Validate(n.Session, p.cfg.limits); err != nil {
		return fmt.Errorf("foldstream client: note %q of session %s not published: %w", n.NoteID, n.Session, err)
	}
	msg, err := p.encode(p.cfg.subjects.In(n.Session, events.KindNote), NoteMsgID(n.Session, n.NoteID), n)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("foldstream client: publish note %q of session %s: %w", n.NoteID, n.Session, err)
	}
	return nil
}

// Control publishes a control event (OpGenerate, OpCompact, OpEnd,
// OpReset, or OpConfigure with cfg) and waits for the acknowledgement.
// Control events carry no Nats-Msg-Id: asking twice is asking twice.
func (p *Publisher) Control(ctx context.Context, session, op string, cfg *SessionConfig) error {
	if p.isClosed() {
		return ErrClosed
	}
	c := Control{V: WireVersion, Session: session, Op: op, At: p.cfg.now().UTC(), Config: cfg}
	if err := events.CheckSession("session", session); err != nil {
		return fmt.Errorf("foldstream client: control not published: %w", err)
	}
	if err := c.Validate(session); err != nil {
		return fmt.Errorf("foldstream client: control %q of session %s not published: %w", op, session, err)
	}
	msg, err := p.encode(p.cfg.subjects.In(session, events.KindControl), "", c)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("foldstream client: publish control %q of session %s: %w", op, session, err)
	}
	return nil
}
