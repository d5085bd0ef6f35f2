package processor

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Dead-lettering must never hold up other sessions: whatever a bad message
// carries (JetStream control headers, a size just under max_payload), the
// event loop hands it to the dead-letter worker (deadLetterer) and moves
// on; the worker keeps a copy or a reference. Only a queue full of bad
// messages while the dead-letter stream still answers makes the loop wait,
// at the stream's pace (deadLetterer.hand); the corrupt-checkpoint
// quarantine (loader.keepCheckpoint) publishes aside, off the loop. The
// original is never deleted from the inbound stream, so nothing is lost by
// moving on.
const (
	// deadLetterAttempts bounds the tries of a publish that failed for a
	// transient reason (a timeout, no responders): a DLQ that stays
	// unreachable must not hold the worker's queue for longer than a few
	// tries per message.
	deadLetterAttempts = 3
	deadLetterTimeout  = 5 * time.Second
	// previewBytes is how much of the original payload a reference keeps.
	previewBytes = 512
	// maxHeaderValue bounds a header value of ours (the reason).
	maxHeaderValue = 1024
)

// reject hands a bad inbound message to the dead-letter worker
// (deadLetterer), which keeps it on the dead-letter stream with the reason
// in headers and then acks it: it is never silently dropped, and it never
// blocks the session's later events, nor any other session's, whatever
// the dead-letter stream does. The event_rejected lifecycle event goes out
// from here: it carries the session's cursor, which only the loop reads.
func (sh *shard) reject(m inMsg, cause error) {
	ve, ok := events.AsValidation(cause)
	if !ok {
		ve = &events.ValidationError{Code: "invalid", Reason: cause.Error()}
	}
	if sh.dl.holding(m) {
		return // a redelivery of one the worker has: it acks this delivery
	}
	if !sh.dl.hand(rejection{m: m, ve: ve, cause: cause}) {
		sh.dl.keepInLog(rejection{m: m, ve: ve, cause: cause}, errDeadLetterQueueFull)
	}
	if events.ValidSession(m.session) {
		ev := events.Lifecycle{V: events.Version, Session: m.session, Type: events.EventRejected, At: sh.clock.Now().UTC(),
			Reason: ve.Code, Error: cause.Error()}
		if ls, ok := sh.sessions[m.session]; ok && sh.inflate(m.session, ls) {
			ev.Cursor, ev.TotalTurns = ls.s.Cursor, ls.s.Total
		}
		data, _ := json.Marshal(ev)
		if _, err := sh.js.PublishAsync(sh.subj.Out(m.session, events.KindEvent), data); err != nil {
			sh.log.Warn().Err(err).Str("event", "publish_failed").Msg("event_rejected not published")
		}
	}
}

// keep stores r's dead letter (deadLetter), then acks the original and
// says so: the ack never goes out before the dead letter is kept or its
// log line written.
func (d *deadLetterer) keep(r rejection) {
	subject, kept := d.deadLetter(r)
	d.rejected(r, subject, kept)
}

// keepInLog makes the error log line the reference of r without trying
// the dead-letter stream (copyErr says why), then acks the original.
func (d *deadLetterer) keepInLog(r rejection, copyErr error) {
	subject := d.subj.DeadLetter(r.m.session)
	d.logOnly(r, subject, copyErr, copyErr)
	d.rejected(r, subject, keptLog)
}

func (d *deadLetterer) rejected(r rejection, subject, kept string) {
	m, ve := r.m, r.ve
	_ = d.release(r).Ack()
	d.m.rejected.WithLabelValues(ve.Code).Inc()
	d.log.Warn().Str("event", "event_rejected").Str("session", m.session).Str("subject", m.msg.Subject()).Uint64("seq", m.seq).
		Str("code", ve.Code).Str("field", ve.Field).Str("reason", ve.Reason).Str("dead_letter", subject).Str("kept", kept).Msg("inbound event rejected")
}

// What the dead-letter stream kept of a rejected message.
const (
	keptCopy      = "copy"      // the payload unchanged, with provenance headers
	keptReference = "reference" // the copy could not be stored: provenance and a preview
	keptLog       = "log"       // neither could be stored: the error log line is the reference
	// keptCheckpoint marks a session checkpoint that could not be decoded
	// (load.go's quarantine), with error code codeCorruptCheckpoint.
	keptCheckpoint        = "checkpoint"
	codeCorruptCheckpoint = "corrupt_checkpoint"
)

// deadLetter stores a copy of the rejected message on its session's
// dead-letter subject. When the copy cannot be stored for a reason that
// another try will not fix (over max_payload or the stream's maximum
// message size, a full DLQ, a refused publish), it stores a reference
// instead: the same provenance headers, Foldstream-Dead-Letter
// "reference", why the copy failed, the original size, and the first
// previewBytes of the payload. If even that fails, the error log line
// (event dead_letter_failed) is the reference. In each of these cases the
// caller acks: the original stays in the inbound stream at its sequence.
// A DLQ that does not answer (a timeout, no responders) is tried
// deadLetterAttempts times with backoff (fewer if the processor stops),
// then treated the same way: a publish the server drops for lack of
// permission looks exactly like that, and leaving the message unacked for
// it would hold the queue, and the consumer's ack floor, for good.
func (d *deadLetterer) deadLetter(r rejection) (subject, kept string) {
	m, ve := r.m, r.ve
	subject = d.subj.DeadLetter(m.session)
	data := m.msg.Data()
	copyMsg := nats.NewMsg(subject)
	copyMsg.Data = data
	copyMsg.Header = deadLetterHeaders(m.msg.Headers(), d.in, d.subj.Published(m.msg.Subject()), m.seq, ve, r.cause)

	// Dedup by original sequence: a redelivered bad message is kept once
	// (a copy or a reference, whichever was stored first).
	msgID := "dlq:" + strconv.FormatUint(m.seq, 10)
	err := d.publish(m, copyMsg, msgID, d.attempts)
	if err == nil {
		d.m.deadLetters.WithLabelValues(keptCopy).Inc()
		return subject, keptCopy
	}
	copyErr := err
	ref := nats.NewMsg(subject)
	ref.Header = copyMsg.Header
	ref.Header.Set(events.HeaderDeadLetter, keptReference)
	ref.Header.Set(events.HeaderCopyError, headerValue(copyErr.Error()))
	ref.Header.Set(events.HeaderOriginalSize, strconv.Itoa(len(data)))
	ref.Data = preview(data)
	attempts := d.attempts
	if transientPublishError(copyErr) {
		attempts = 1 // already tried as often as allowed
	}
	if err = d.publish(m, ref, msgID, attempts); err == nil {
		d.m.deadLetters.WithLabelValues(keptReference).Inc()
		d.log.Error().Err(copyErr).Str("event", "dead_letter_reference").Str("session", m.session).Str("stream", d.in).
			Uint64("seq", m.seq).Int("size", len(data)).Str("code", ve.Code).Str("field", ve.Field).Str("dead_letter", subject).
			Msg("rejected event too large or refused for the dead-letter stream; a reference was kept there instead, the original stays in the inbound stream")
		return subject, keptReference
	}
	// Neither stored (a full or missing DLQ, no permission).
	d.logOnly(r, subject, copyErr, err)
	return subject, keptLog
}

// logOnly makes the error log line the reference of a rejected message
// nothing of which could be stored (a full or missing DLQ, no
// permission, a full queue). The preview is transcript text, so only at
// debug.
func (d *deadLetterer) logOnly(r rejection, subject string, copyErr, refErr error) {
	m, ve := r.m, r.ve
	data := m.msg.Data()
	d.m.deadLetters.WithLabelValues(keptLog).Inc()
	d.log.Error().Err(copyErr).Str("reference_error", refErr.Error()).Str("event", "dead_letter_failed").Str("session", m.session).
		Str("stream", d.in).Uint64("seq", m.seq).Int("size", len(data)).Str("code", ve.Code).Str("field", ve.Field).
		Str("dead_letter", subject).Msg("rejected event could not be kept on the dead-letter stream; skipped, the original stays in the inbound stream at this sequence")
	d.log.Debug().Str("event", "dead_letter_preview").Uint64("seq", m.seq).Bytes("preview", preview(data)).Msg("rejected event preview")
}

// publish publishes a dead letter of m (publishDeadLetter), telling the
// server before each new try that m is still being worked on, so that it
// is not redelivered meanwhile, and hand whether the stream answers.
func (d *deadLetterer) publish(m inMsg, msg *nats.Msg, msgID string, attempts int) error {
	err := publishDeadLetter(d.ctx, d.js, msg, msgID, attempts, func() {
		// No answer yet: a full queue stops waiting for room now, not
		// only once every try has failed.
		d.failing(true)
		d.mu.Lock()
		msg := d.held[m.seq]
		d.mu.Unlock()
		if msg == nil {
			msg = m.msg
		}
		_ = msg.InProgress()
	})
	d.failing(err != nil && (transientPublishError(err) || d.ctx.Err() != nil))
	return err
}

// publishDeadLetter publishes msg, trying transient failures again with
// backoff up to attempts tries in all, each bounded by deadLetterTimeout,
// until ctx ends. retrying, if not nil, is called before each new try.
func publishDeadLetter(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, msgID string, attempts int, retrying func()) error {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     100 * time.Millisecond,
		RandomizationFactor: 0.3,
		Multiplier:          2,
		MaxInterval:         2 * time.Second,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	try := func() error {
		actx, cancel := context.WithTimeout(ctx, deadLetterTimeout)
		defer cancel()
		_, err := js.PublishMsg(actx, msg, jetstream.WithMsgID(msgID))
		if err != nil && !transientPublishError(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	notify := func(error, time.Duration) {
		if retrying != nil {
			retrying()
		}
	}
	return backoff.RetryNotify(try, backoff.WithContext(backoff.WithMaxRetries(b, uint64(max(attempts, 1)-1)), ctx), notify)
}

// transientPublishError tells a failure that a later try may fix (no
// answer in time, no stream responding) from one that it will not (too
// large, refused by the stream, a wrong expectation, no permission
// reported).
func transientPublishError(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting)
}

// deadLetterHeaders are the headers of a dead-letter copy: the original's
// application headers, without any header in the server's reserved Nats-
// namespace (Nats-Expected-Stream, Nats-Expected-Last-*, Nats-Msg-Id,
// Nats-Rollup, Nats-TTL, Nats-Marker-Reason, Nats-Schedule-*,
// Nats-Batch-*, ...: they are instructions to the stream that stored the
// original, which the DLQ would obey and refuse) and without any
// Foldstream- header (ours only: a bot cannot forge provenance). Then
// the provenance set, which is ours.
func deadLetterHeaders(orig nats.Header, stream, subject string, seq uint64, ve *events.ValidationError, cause error) nats.Header {
	h := nats.Header{}
	var msgID string
	for k, v := range orig {
		lk := strings.ToLower(k)
		if lk == strings.ToLower(jetstream.MsgIDHeader) && len(v) > 0 {
			msgID = v[0]
		}
		if strings.HasPrefix(lk, "nats-") || strings.HasPrefix(lk, "foldstream-") {
			continue
		}
		h[k] = v
	}
	h.Set(events.HeaderErrorCode, headerValue(ve.Code))
	h.Set(events.HeaderErrorField, headerValue(ve.Field))
	h.Set(events.HeaderError, headerValue(cause.Error()))
	h.Set(events.HeaderOriginalSubject, headerValue(subject)) // as the bot sent it, not as partitioned
	h.Set(events.HeaderOriginalStream, stream)
	h.Set(events.HeaderOriginalSeq, strconv.FormatUint(seq, 10))
	if msgID != "" {
		h.Set(events.HeaderOriginalMsgID, headerValue(msgID))
	}
	return h
}

// headerValue makes s safe as a header value: valid UTF-8, on one line,
// at most maxHeaderValue bytes.
func headerValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxHeaderValue {
		s = truncateUTF8(s, maxHeaderValue)
	}
	return s
}

// preview is the start of a payload, cut on a rune boundary when it is
// text.
func preview(data []byte) []byte {
	if len(data) <= previewBytes {
		return data
	}
	return []byte(truncateUTF8(string(data[:min(len(data), previewBytes+utf8.UTFMax)]), previewBytes))
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > n-utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = n // not text: a byte cut
	}
	return s[:cut]
}
