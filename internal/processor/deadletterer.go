package processor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// deadLetterQueue bounds the rejected messages handed to the dead-letter
// worker and not kept yet; deadLetterQueueBytes bounds their payloads (a
// burst of messages just under max_payload must not hold gigabytes).
const (
	deadLetterQueue      = 1024
	deadLetterQueueBytes = 64 << 20
)

// errDeadLetterQueueFull is the copy error of a rejected message that
// found the worker's queue full while the dead-letter stream was failing.
var errDeadLetterQueueFull = errors.New("dead-letter queue full while the dead-letter stream is not answering")

// rejection is a rejected inbound message on its way to the dead-letter
// stream: everything deadLetter needs, nothing of the shard's state.
type rejection struct {
	m     inMsg
	ve    *events.ValidationError
	cause error
}

// deadLetterer keeps rejected messages on the dead-letter stream off the
// event loops: a dead-letter stream that is slow or down delays only the
// rejected messages, never another session's events. One per processor,
// one goroutine, started and stopped with Run. For each rejection it
// stores a copy, else a reference, else logs (deadLetter), and only then
// acks the original: the ack never goes out before the dead letter is
// kept (or the log line written), and a crash in between redelivers the
// message, whose copy the stream then deduplicates (msg id dlq:<seq>).
type deadLetterer struct {
	js    jetstream.JetStream
	subj  events.Subjects
	in    string // the inbound stream's name, for references
	m     *metrics
	log   zerolog.Logger
	ctx   context.Context // cancelled when the processor stops: retries end
	queue chan rejection
	bytes atomic.Int64 // payload bytes queued
	done  chan struct{}
	// attempts bounds the tries of a dead-letter publish that got no
	// answer (deadLetterAttempts; Config.deadLetterAttempts in tests).
	attempts int

	mu sync.Mutex
	// room is closed each time a rejection leaves the queue (hand waits
	// on it), then replaced.
	room chan struct{}
	// sick is closed while the dead-letter stream is failing (the last
	// publish got no answer); a new open channel once it answers again.
	sick chan struct{}
	// held maps the stream sequence of each rejection handed over and not
	// acked yet to its newest delivery, the one to ack. A redelivery of a
	// held message (its AckWait passed while it waited in the queue, or a
	// rewind re-created the consumer) only replaces that delivery: it is
	// neither handed over nor reported rejected a second time.
	held map[uint64]jetstream.Msg
}

func newDeadLetterer(p *Processor, ctx context.Context, attempts int) *deadLetterer {
	if attempts <= 0 {
		attempts = deadLetterAttempts
	}
	return &deadLetterer{js: p.js, subj: p.subj, in: p.layout.In, m: p.m, log: p.log, ctx: ctx, attempts: attempts, queue: make(chan rejection, deadLetterQueue), done: make(chan struct{}),
		room: make(chan struct{}), sick: make(chan struct{}), held: make(map[uint64]jetstream.Msg)}
}

// holding reports whether m's sequence is with the worker already, and if
// so makes m the delivery the worker acks.
func (d *deadLetterer) holding(m inMsg) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.held[m.seq]; !ok {
		return false
	}
	d.held[m.seq] = m.msg
	return true
}

// release ends r's hold and returns the delivery to ack: the newest one
// of its message.
func (d *deadLetterer) release(r rejection) jetstream.Msg {
	d.mu.Lock()
	defer d.mu.Unlock()
	msg, ok := d.held[r.m.seq]
	if !ok {
		return r.m.msg // kept in the log without being handed over
	}
	delete(d.held, r.m.seq)
	return msg
}

// run keeps what is queued until the queue is closed (stop).
func (d *deadLetterer) run() {
	defer close(d.done)
	for r := range d.queue {
		d.keep(r)
		d.bytes.Add(-int64(len(r.m.msg.Data())))
		d.mu.Lock()
		close(d.room)
		d.room = make(chan struct{})
		d.mu.Unlock()
	}
}

// stop waits until every queued rejection is kept or logged, and acked:
// once the context ends (the shutdown grace is over), publishes fail at
// once and what is left goes to the log. The event loops must be stopped
// first: nothing is handed over after stop.
func (d *deadLetterer) stop() {
	close(d.queue)
	<-d.done
}

// hand gives r to the worker. The loop never waits for a dead-letter
// stream that is not answering: when the queue is full (by count or by
// bytes) while the last publish failed, hand returns false and the caller
// keeps the message in the log at once (keepInLog). Waiting instead would
// stall every session of the shard for as long as the outage lasts, which
// is what the worker is for; leaving the message unacked would be worse
// than the log: it would sit in the consumer's window, redelivered at
// every AckWait, and one rejected by a check after decoding (an ended
// session, a skewed clock), redelivered after its session moved on, would
// look applied before and be acked without being kept anywhere but the
// inbound stream. While the stream answers, a full queue is only a burst
// of bad messages faster than the stream stores them: the loop waits for
// room (back-pressure at the stream's own pace) unless the stream starts
// failing meanwhile.
func (d *deadLetterer) hand(r rejection) bool {
	n := int64(len(r.m.msg.Data()))
	for {
		// An empty queue takes any message: one over the byte bound
		// alone must not wait forever.
		// Held before it is queued: the worker may ack it at once.
		d.mu.Lock()
		sick, room := d.sick, d.room
		d.held[r.m.seq] = r.m.msg
		d.mu.Unlock()
		if q := d.bytes.Add(n); q == n || q <= deadLetterQueueBytes {
			select {
			case d.queue <- r:
				return true
			default:
			}
		}
		d.bytes.Add(-n)
		d.mu.Lock()
		delete(d.held, r.m.seq)
		d.mu.Unlock()
		select {
		case <-room:
		case <-sick:
			return false
		case <-d.ctx.Done():
			return false
		}
	}
}

// failing records whether the dead-letter stream answered the last publish.
func (d *deadLetterer) failing(yes bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.sick:
		if !yes {
			d.sick = make(chan struct{})
		}
	default:
		if yes {
			close(d.sick)
		}
	}
}
