package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// archiveKey names the archived state of one life of a session: a session
// archived, reset and archived again keeps both, by epoch.
func archiveKey(id string, epoch uint32) string {
	return id + ".archive." + strconv.FormatUint(uint64(epoch), 10)
}

// Archive writes the session's final state (summary, counters, and the
// refs of any turns still unfolded, which point into the inbound stream)
// under its archive key. Writing it twice (a retry after a crash) is
// harmless: the same life of the session has the same key.
func (st *Store) Archive(ctx context.Context, s *Session) error {
	a, err := s.Archival()
	if err != nil {
		return err
	}
	return st.WriteArchive(ctx, a)
}

// Archival is a session's final state encoded for its archive key, to be
// written by WriteArchive.
type Archival struct {
	ID, key string
	data    []byte
}

// Archival encodes the session's final state for Archive without writing
// it: the write can then wait for the server away from the goroutine that
// changes the session.
func (s *Session) Archival() (Archival, error) {
	c := *s
	c.Sealed = 0 // every ref inline: the archive outlives the sealed chunks
	data, err := c.Encode(nil)
	if err != nil {
		return Archival{}, fmt.Errorf("encode archive of session %s: %w", s.ID, err)
	}
	return Archival{ID: s.ID, key: archiveKey(s.ID, s.Epoch), data: data}, nil
}

// WriteArchive writes an archive encoded by Archival.
func (st *Store) WriteArchive(ctx context.Context, a Archival) error {
	if _, err := st.kv.Put(ctx, a.key, a.data); err != nil {
		return fmt.Errorf("archive session %s: %w", a.ID, err)
	}
	return nil
}

// LoadArchive returns the archived state of the session's life epoch, or
// nil when there is none.
func (st *Store) LoadArchive(ctx context.Context, id string, epoch uint32) (*Session, error) {
	e, err := st.kv.Get(ctx, archiveKey(id, epoch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load archive %d of session %s: %w", epoch, id, err)
	}
	s, err := Decode(id, e.Value())
	if err != nil {
		return nil, fmt.Errorf("decode archive %d of session %s: %w", epoch, id, err)
	}
	return s, nil
}

// Tombstone is what remains of an archived session in its checkpoint: enough
// to refuse later events clearly, to keep redeliveries no-ops, and to keep
// summary versions increasing if it is reset.
func (s *Session) Tombstone() *Session {
	t := New(s.ID)
	t.Ended, t.Archived = true, true
	t.LastSeq, t.Version, t.SummarySeq, t.Epoch, t.LastEventAt = s.LastSeq, s.Version, s.SummarySeq, s.Epoch+1, s.LastEventAt
	t.Config = s.Config
	t.MemoryIDs = s.MemoryIDs
	return t
}
