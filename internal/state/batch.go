package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Loaded is one checkpoint read by LoadMany.
type Loaded struct {
	ID  string
	S   *Session
	Rev uint64
	Err error
	// Text is S's summarizer state as the checkpoint stored it, for its
	// next checkpoint (DecodeReusing); nil when S has no state.
	Text *StateText
}

// MaxLoadMany is the most ids one LoadMany request asks for.
const MaxLoadMany = 256

// LoadMany reads the checkpoints of ids (distinct, at most MaxLoadMany)
// with one request where the bucket allows direct gets: JetStream's
// multi_last direct get answers with the last message of every key that
// exists, then an end-of-batch status. A burst of new sessions then costs
// one round trip per batch instead of one per session. Sessions whose
// checkpoint has sealed chunks, and buckets without direct gets, are read
// one by one with Load. The result is in the order of ids.
func (st *Store) LoadMany(ctx context.Context, ids []string) []Loaded {
	out := make([]Loaded, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	found, err := st.multiLast(ctx, ids)
	for i := range out {
		l := &out[i]
		if err == nil {
			raw, ok := found[l.ID]
			if !ok {
				l.S = New(l.ID) // never written, or deleted
				continue
			}
			if raw.data != nil {
				text := new(StateText)
				s, derr := DecodeReusing(l.ID, raw.data, text)
				if derr != nil {
					l.Err = &CorruptError{ID: l.ID, Revision: raw.rev, Data: raw.data, Err: derr}
					continue
				}
				if s.Sealed <= s.Cursor {
					l.S, l.Rev, l.Text = s, raw.rev, text
					continue
				}
			}
		}
		// Sealed chunks (their reads retry on a moving owner), or no batch.
		l.Text = new(StateText)
		l.S, l.Rev, l.Err = st.load(ctx, l.ID, l.Text)
	}
	for i := range out {
		if out[i].S == nil || len(out[i].S.SummaryState) == 0 {
			out[i].Text = nil
		}
	}
	return out
}

type lastEntry struct {
	rev  uint64
	data []byte // nil: found but to be read with Load
}

// errNoDirect: the bucket does not allow direct gets.
var errNoDirect = errors.New("bucket does not allow direct gets")

// multiLast asks for the last message of each id's key. Deleted keys are
// left out, as missing ones are.
func (st *Store) multiLast(ctx context.Context, ids []string) (map[string]lastEntry, error) {
	if len(ids) == 0 || len(ids) > MaxLoadMany {
		return nil, fmt.Errorf("load many: expected 1 to %d ids, got %d", MaxLoadMany, len(ids))
	}
	ok, err := st.directAllowed(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNoDirect
	}
	subjects := make([]string, len(ids))
	for i, id := range ids {
		subjects[i] = st.putPrefix + id
	}
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return nil, err
	}
	nc := st.js.Conn()
	inbox := nc.NewInbox()
	// A channel with room for every answer (one per id, then the status):
	// SubscribeSync would allocate the default 64k-slot buffer per call.
	answers := make(chan *nats.Msg, len(ids)+2)
	sub, err := nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(broker.APIPrefix(st.js)+"DIRECT.GET.KV_"+st.kv.Bucket(), inbox, req); err != nil {
		return nil, err
	}
	found := make(map[string]lastEntry, len(ids))
	for {
		var m *nats.Msg
		select {
		case m = <-answers:
		case <-ctx.Done():
			return nil, fmt.Errorf("load %d sessions: %w", len(ids), ctx.Err())
		}
		switch status := broker.AnswerStatus(m); status {
		case "":
		case "204": // end of batch
			if np := m.Header.Get("Nats-Num-Pending"); np != "" && np != "0" {
				// Cut short (the server's byte limit): read them one by one.
				return nil, fmt.Errorf("load %d sessions: direct get stopped with %s left", len(ids), np)
			}
			return found, nil
		case "404":
			if m.Header.Get("Description") == "No Results" {
				return found, nil // none of them exists
			}
			fallthrough
		default:
			return nil, fmt.Errorf("load %d sessions: direct get answered %s %s", len(ids), status, m.Header.Get("Description"))
		}
		id := strings.TrimPrefix(m.Header.Get(jetstream.SubjectHeader), st.putPrefix)
		rev, err := broker.AnswerSeq(m)
		if err != nil {
			return nil, fmt.Errorf("load %d sessions: answer for %q: %w", len(ids), id, err)
		}
		switch m.Header.Get("KV-Operation") {
		case "DEL", "PURGE":
			continue // as kv.Get: not found
		}
		found[id] = lastEntry{rev: rev, data: m.Data}
	}
}

// directAllowed reports, once per store, whether the bucket's stream
// answers direct gets.
func (st *Store) directAllowed(ctx context.Context) (bool, error) {
	switch st.direct.Load() {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	status, err := st.kv.Status(ctx)
	if err != nil {
		return false, fmt.Errorf("bucket status: %w", err)
	}
	allowed := false
	if bs, ok := status.(*jetstream.KeyValueBucketStatus); ok {
		allowed = bs.StreamInfo().Config.AllowDirect
	}
	if allowed {
		st.direct.Store(1)
	} else {
		st.direct.Store(2)
	}
	return allowed, nil
}
