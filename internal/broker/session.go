package broker

import (
	"context"
	"errors"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
)

// SessionEvents reads one session's inbound events by direct get, in
// stream order, under the subjects of every layout
// (events.Subjects.InSessionAll): those stored before a change of
// --partitions and those after. Every reader of a session's events goes
// through it or through InSessionAll's filters, so none loses the turns of
// an earlier layout. One stored message is one event: a message is read
// once whatever the layouts.
//
// Each layout's next message is fetched once and kept until it is the
// lowest: a session stored under one layout costs one direct get per
// event, plus one per other layout to learn it has none.
type SessionEvents struct {
	stream  jetstream.Stream
	filters []string
	heads   []*jetstream.RawStreamMsg
	done    []bool
	next    uint64
}

// NewSessionEvents reads session's inbound events on stream from sequence
// from on.
func NewSessionEvents(stream jetstream.Stream, subj events.Subjects, session string, from uint64) *SessionEvents {
	f := subj.InSessionAll(session)
	return &SessionEvents{stream: stream, filters: f, heads: make([]*jetstream.RawStreamMsg, len(f)), done: make([]bool, len(f)), next: max(from, 1)}
}

// Next returns the session's next event, or jetstream.ErrMsgNotFound when
// none is stored after the last one returned.
func (r *SessionEvents) Next(ctx context.Context) (*jetstream.RawStreamMsg, error) {
	best := -1
	for i, f := range r.filters {
		if r.heads[i] == nil && !r.done[i] {
			msg, err := r.stream.GetMsg(ctx, r.next, jetstream.WithGetMsgSubject(f))
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
				r.done[i] = true
			case err != nil:
				return nil, err
			default:
				r.heads[i] = msg
			}
		}
		if h := r.heads[i]; h != nil && (best < 0 || h.Sequence < r.heads[best].Sequence) {
			best = i
		}
	}
	if best < 0 {
		return nil, jetstream.ErrMsgNotFound
	}
	msg := r.heads[best]
	r.heads[best] = nil
	r.next = msg.Sequence + 1
	return msg, nil
}

// LastSessionEvent is the session's newest inbound event under any layout,
// or jetstream.ErrMsgNotFound.
func LastSessionEvent(ctx context.Context, stream jetstream.Stream, subj events.Subjects, session string) (*jetstream.RawStreamMsg, error) {
	var last *jetstream.RawStreamMsg
	for _, f := range subj.InSessionAll(session) {
		msg, err := stream.GetLastMsgForSubject(ctx, f)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if last == nil || msg.Sequence > last.Sequence {
			last = msg
		}
	}
	if last == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return last, nil
}

// SessionStored says how many of the session's inbound events the stream
// holds on each subject it stores them under, under every layout, and the
// stream's last sequence.
func SessionStored(ctx context.Context, stream jetstream.Stream, subj events.Subjects, session string) (subjects map[string]uint64, lastSeq uint64, err error) {
	subjects = map[string]uint64{}
	for _, f := range subj.InSessionAll(session) {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(f))
		if err != nil {
			return nil, 0, err
		}
		for s, n := range info.State.Subjects {
			subjects[s] += n
		}
		lastSeq = max(lastSeq, info.State.LastSeq)
	}
	return subjects, lastSeq, nil
}
