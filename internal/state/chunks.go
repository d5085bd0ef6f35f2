package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ChunkSize is the number of turn refs in one sealed chunk.
//
// The checkpoint is rewritten on every flush, so it must not grow with a
// backlog: when a session's unfolded turns exceed two chunks (folds lag far
// behind ingest), full chunks of refs are sealed into their own immutable KV
// keys once, and the checkpoint keeps only the tail. In steady state (about
// recent+batch unfolded turns) no chunk is ever written.
const ChunkSize = 512

// errBadChunk: a sealed chunk does not decode or holds the wrong refs.
var errBadChunk = errors.New("bad sealed refs chunk")

// chunk is the value of one sealed chunk key.
type chunk struct {
	From int64    `json:"from"` // absolute turn index of Refs[0]
	Refs TurnRefs `json:"refs"`
}

// chunkKey names chunk k of a session's current epoch; the epoch changes
// on reset so a new transcript never reads an old chunk.
func chunkKey(id string, epoch uint32, k int64) string {
	return fmt.Sprintf("%s.refs.%d.%d", id, epoch, k)
}

// refsFrom is the absolute index of the first ref kept inline.
func (s *Session) refsFrom() int64 { return max(s.Cursor, s.Sealed) }

// stored is the view written to KV: the inline tail of the refs only.
func (s *Session) stored() *Session {
	skip := int(s.refsFrom() - s.Cursor)
	if skip <= 0 {
		return s
	}
	c := *s
	c.Turns = s.Turns[min(skip, len(s.Turns)):]
	return &c
}

// NeedsSeal reports whether the inline refs have grown past two chunks.
func (s *Session) NeedsSeal() bool { return s.Total-s.refsFrom() > 2*ChunkSize }

// Seal writes every full chunk not yet sealed and advances s.Sealed. It must
// complete before a checkpoint that relies on it is written.
func (st *Store) Seal(ctx context.Context, s *Session) error {
	c, err := s.Sealing()
	if err != nil {
		return err
	}
	if err := st.WriteChunks(ctx, c); err != nil {
		return err
	}
	s.Sealed = c.Sealed
	return nil
}

// Chunks are sealed ref chunks encoded, to be written (WriteChunks) before
// the checkpoint that says Sealed.
type Chunks struct {
	ID     string
	Keys   []string
	Data   [][]byte
	Sealed int64 // the session's Sealed once they are written
}

// Sealing encodes every full chunk not yet sealed, without writing it:
// the caller writes them (WriteChunks), off the goroutine that changes the
// session if it likes, then sets s.Sealed to the chunks' Sealed.
func (s *Session) Sealing() (Chunks, error) {
	c := Chunks{ID: s.ID, Sealed: s.Sealed}
	end := s.Total / ChunkSize * ChunkSize
	for k := s.refsFrom() / ChunkSize; (k+1)*ChunkSize <= end; k++ {
		from := max(k*ChunkSize, s.Cursor)
		lo, hi := int(from-s.Cursor), int((k+1)*ChunkSize-s.Cursor)
		data, err := json.Marshal(chunk{From: from, Refs: s.Turns[lo:hi]})
		if err != nil {
			return Chunks{}, fmt.Errorf("encode refs chunk %d of session %s: %w", k, s.ID, err)
		}
		c.Keys = append(c.Keys, chunkKey(s.ID, s.Epoch, k))
		c.Data = append(c.Data, data)
		c.Sealed = (k + 1) * ChunkSize
	}
	return c, nil
}

// WriteChunks writes chunks encoded by Sealing, in order.
func (st *Store) WriteChunks(ctx context.Context, c Chunks) error {
	for i, key := range c.Keys {
		if _, err := st.kv.Put(ctx, key, c.Data[i]); err != nil {
			return fmt.Errorf("seal refs chunk %s of session %s: %w", key, c.ID, err)
		}
	}
	return nil
}

// loadChunks prepends the sealed refs [Cursor, Sealed) after a load.
func (st *Store) loadChunks(ctx context.Context, s *Session) error {
	if s.Sealed <= s.Cursor {
		return nil
	}
	var refs TurnRefs
	for k := s.Cursor / ChunkSize; k*ChunkSize < s.Sealed; k++ {
		e, err := st.kv.Get(ctx, chunkKey(s.ID, s.Epoch, k))
		if err != nil {
			return fmt.Errorf("session %s: sealed refs chunk %d (turns %d..%d) is missing: %w", s.ID, k, k*ChunkSize, (k+1)*ChunkSize-1, err)
		}
		var c chunk
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			return fmt.Errorf("session %s: decode refs chunk %d: %w (%w)", s.ID, k, errBadChunk, err)
		}
		for i, r := range c.Refs {
			if idx := c.From + int64(i); idx >= s.Cursor && idx < s.Sealed {
				refs = append(refs, r)
			}
		}
	}
	if int64(len(refs)) != s.Sealed-s.Cursor {
		return fmt.Errorf("session %s: sealed chunks hold %d refs for turns %d..%d: %w", s.ID, len(refs), s.Cursor, s.Sealed-1, errBadChunk)
	}
	s.Turns = append(refs, s.Turns...)
	return nil
}

// DropChunks removes sealed chunks that lie entirely before the cursor.
// Best effort: a chunk left behind is only garbage, never read again.
func (st *Store) DropChunks(ctx context.Context, id string, epoch uint32, oldCursor, newCursor, sealed int64) error {
	var errs []error
	for k := oldCursor / ChunkSize; (k+1)*ChunkSize <= min(newCursor, sealed); k++ {
		if err := st.kv.Purge(ctx, chunkKey(id, epoch, k)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
