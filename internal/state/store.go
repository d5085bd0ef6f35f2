package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrConflict means another owner changed the checkpoint since it was read:
// the caller must reload and must not advance anything.
var ErrConflict = errors.New("session checkpoint changed by another owner")

// Store keeps checkpoints in a JetStream KV bucket, one key per session.
type Store struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
	// putPrefix is the bucket's subject prefix for pipelined writes.
	putPrefix string
	direct    *atomic.Int32 // LoadMany: 0 not known yet, 1 direct gets, 2 none
}

// NewStore wraps a KV bucket. js is used for pipelined writes (SaveAsync).
func NewStore(js jetstream.JetStream, kv jetstream.KeyValue) *Store {
	return &Store{kv: kv, js: js, putPrefix: "$KV." + kv.Bucket() + ".", direct: new(atomic.Int32)}
}

// SaveAsync starts a compare-and-set write without waiting for it: a shard
// flushing many sessions pipelines their writes and acks each session's
// messages as its write is confirmed. rev 0 expects the key to have no
// history at all; a key that was deleted (a delete marker) conflicts, and
// the caller falls back to Save, whose create handles markers. The
// future's error is a conflict when IsConflict says so.
func (st *Store) SaveAsync(s *Session, rev uint64) (jetstream.PubAckFuture, error) {
	data, err := s.Encode(nil)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint of session %s: %w", s.ID, err)
	}
	return st.SaveEncodedAsync(s.ID, data, rev)
}

// SaveEncodedAsync is SaveAsync of a checkpoint already encoded (Encode,
// EncodeReusing).
func (st *Store) SaveEncodedAsync(id string, data []byte, rev uint64) (jetstream.PubAckFuture, error) {
	msg := &nats.Msg{Subject: st.putPrefix + id, Data: data, Header: nats.Header{}}
	f, err := st.js.PublishMsgAsync(msg, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return nil, fmt.Errorf("save session %s: %w", id, err)
	}
	return f, nil
}

// IsConflict reports whether a write failed because the revision moved.
func IsConflict(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err)
}

// Load returns the checkpoint and its revision; a session never seen has
// revision 0 and a fresh state. Readers other than the owner can race with
// it (the owner may advance and drop a sealed chunk between our reads), so
// a missing chunk is retried on a newer revision before it is an error.
func (st *Store) Load(ctx context.Context, id string) (*Session, uint64, error) {
	return st.load(ctx, id, nil)
}

// load is Load, its state's stored form left in text (DecodeReusing).
func (st *Store) load(ctx context.Context, id string, text *StateText) (*Session, uint64, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		e, err := st.kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return New(id), 0, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("load session %s: %w", id, err)
		}
		s, err := DecodeReusing(id, e.Value(), text)
		if err != nil {
			return nil, 0, &CorruptError{ID: id, Revision: e.Revision(), Data: e.Value(), Err: err}
		}
		lastErr = st.loadChunks(ctx, s)
		if lastErr == nil {
			return s, e.Revision(), nil
		}
		if cur, err := st.kv.Get(ctx, id); err == nil && cur.Revision() == e.Revision() {
			// Nothing moved: the chunk is really gone or unreadable (a
			// read that failed for another reason is worth another try).
			if errors.Is(lastErr, jetstream.ErrKeyNotFound) || errors.Is(lastErr, errBadChunk) {
				return nil, 0, &CorruptError{ID: id, Revision: e.Revision(), Data: e.Value(), Err: lastErr}
			}
			break
		}
	}
	return nil, 0, lastErr
}

// ErrCorrupt means a checkpoint exists but cannot be read back: it does not
// decode, or a sealed chunk it refers to is gone or does not decode.
// Reading it again will not help; CorruptError says which and holds the
// stored bytes.
var ErrCorrupt = errors.New("checkpoint cannot be decoded")

// CorruptError is a checkpoint that cannot be read back (ErrCorrupt).
type CorruptError struct {
	ID       string
	Revision uint64 // the KV revision holding it
	Data     []byte // the stored value
	Err      error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("checkpoint of session %s (revision %d) cannot be decoded: %v", e.ID, e.Revision, e.Err)
}

func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// Decode reads a checkpoint in the form Encode writes (the KV value). The
// refs of sealed chunks are not in it: Load reads them from their keys.
func Decode(id string, data []byte) (*Session, error) { return DecodeReusing(id, data, nil) }

// DecodeReusing is Decode that also leaves in st (when not nil) the
// summarizer state's stored form when it is compressed, for the session's
// next checkpoint (EncodeReusing), as UnpackReusing does: that checkpoint
// does not compress the state again.
func DecodeReusing(id string, data []byte, st *StateText) (*Session, error) {
	s := New(id)
	data, tail := splitTail(data)
	if err := json.Unmarshal(data, s); err != nil {
		return nil, err
	}
	if tail != nil {
		if len(s.SummaryState) > 0 {
			return nil, errors.New("summary_state: both in the JSON and after it")
		}
		if !bytes.HasPrefix(tail, stateMagic) {
			return nil, fmt.Errorf("after the JSON: expected a compressed summary_state (%q), got %q", stateMagic, tail[:min(len(tail), len(stateMagic))])
		}
		s.SummaryState = tail
	}
	raw, err := expandState(s.SummaryState)
	if err != nil {
		return nil, err
	}
	if st != nil && bytes.HasPrefix(s.SummaryState, stateMagic) {
		st.set(raw, s.SummaryState)
	}
	s.SummaryState = raw
	return s, nil
}

// splitTail splits a checkpoint into its JSON and what follows it, the
// compressed summarizer state (Encode), at the first NUL byte: JSON text
// never holds one (a string escapes it), and the state's mark starts
// with one. No NUL: all JSON, tail nil.
func splitTail(data []byte) (doc, tail []byte) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return data[:i], data[i:]
	}
	return data, nil
}

// Save writes the checkpoint with compare-and-set on rev (0 = must not
// exist yet) and returns the new revision.
func (st *Store) Save(ctx context.Context, s *Session, rev uint64) (uint64, error) {
	data, err := s.Encode(nil)
	if err != nil {
		return 0, fmt.Errorf("encode checkpoint of session %s: %w", s.ID, err)
	}
	return st.SaveEncoded(ctx, s.ID, data, rev)
}

// SaveEncoded is Save of a checkpoint already encoded (Encode), so the
// write can wait for the server away from the goroutine that changes the
// session.
func (st *Store) SaveEncoded(ctx context.Context, id string, data []byte, rev uint64) (uint64, error) {
	var nrev uint64
	var err error
	if rev == 0 {
		nrev, err = st.kv.Create(ctx, id, data)
	} else {
		nrev, err = st.kv.Update(ctx, id, data, rev)
	}
	if err != nil {
		if IsConflict(err) {
			return 0, fmt.Errorf("save session %s at revision %d: %w", id, rev, ErrConflict)
		}
		return 0, fmt.Errorf("save session %s: %w", id, err)
	}
	return nrev, nil
}

// Delete removes a session's checkpoint (after end + archive).
func (st *Store) Delete(ctx context.Context, id string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev > 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := st.kv.Delete(ctx, id, opts...); err != nil {
		if isWrongLastSequence(err) {
			return fmt.Errorf("delete session %s: %w", id, ErrConflict)
		}
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
