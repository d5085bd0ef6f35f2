package state

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/nats-io/nats.go/jetstream"
)

func newStore(t *testing.T) (*Store, jetstream.KeyValue) {
	t.Helper()
	e := brokertest.Start(t, brokertest.Options{})
	return NewStore(e.JS, e.KV), e.KV
}

// A backlog of unfolded turns is sealed into chunks so the checkpoint
// stays small; loading puts every ref back; folded chunks are removed.
func TestBacklogIsSealedIntoChunks(t *testing.T) {
	st, kv := newStore(t)
	ctx := context.Background()
	s := New("big")
	for i := range 3000 {
		s.AddTurn(uint64(i), TurnRef{Seq: uint64(10 + i), At: int64(i)})
	}
	rev, err := st.Save(ctx, s, 0) // first write, not sealed yet
	if err != nil {
		t.Fatal(err)
	}
	if !s.NeedsSeal() {
		t.Fatal("3000 unfolded turns should need sealing")
	}
	if err := st.Seal(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.Sealed != 5*ChunkSize || s.NeedsSeal() {
		t.Fatalf("sealed %d", s.Sealed)
	}
	if rev, err = st.Save(ctx, s, rev); err != nil {
		t.Fatal(err)
	}
	e, _ := kv.Get(ctx, "big")
	var inline Session
	_ = json.Unmarshal(e.Value(), &inline)
	if len(inline.Turns) != 3000-5*ChunkSize {
		t.Fatalf("checkpoint holds %d refs inline", len(inline.Turns))
	}
	got, _, err := st.Load(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Turns, s.Turns) {
		t.Fatalf("loaded %d refs, want %d identical", len(got.Turns), len(s.Turns))
	}

	// Fold past two chunks and into the third.
	old := s.Cursor
	s.Advance(1100, 0)
	if _, err := st.Save(ctx, s, rev); err != nil {
		t.Fatal(err)
	}
	if err := st.DropChunks(ctx, s.ID, s.Epoch, old, s.Cursor, s.Sealed); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[int64]bool{0: false, 1: false, 2: true, 4: true} {
		_, err := kv.Get(ctx, chunkKey("big", 0, k))
		if (err == nil) != want {
			t.Errorf("chunk %d present=%v, want %v", k, err == nil, want)
		}
	}
	got, _, err = st.Load(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if got.Cursor != 1100 || len(got.Turns) != 1900 || got.Turns[0].Seq != 1110 || !reflect.DeepEqual(got.Turns, s.Turns) {
		t.Fatalf("after fold: cursor %d, %d refs, first seq %d", got.Cursor, len(got.Turns), got.Turns[0].Seq)
	}
}

func TestMissingChunkIsAClearError(t *testing.T) {
	st, kv := newStore(t)
	ctx := context.Background()
	s := New("s")
	for i := range 1500 {
		s.AddTurn(uint64(i), TurnRef{Seq: uint64(i + 1)})
	}
	if err := st.Seal(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Save(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, chunkKey("s", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Load(ctx, "s"); err == nil {
		t.Fatal("load with a missing chunk succeeded")
	}
}

// A deleted session leaves a delete marker: a pipelined create conflicts
// (the processor then falls back to Save), and Save's create succeeds.
func TestCreateAfterDelete(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	s := New("gone")
	rev, err := st.Save(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "gone", rev); err != nil {
		t.Fatal(err)
	}
	if _, rev, _ := st.Load(ctx, "gone"); rev != 0 {
		t.Fatalf("deleted session loads at revision %d", rev)
	}
	f, err := st.SaveAsync(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ok():
		t.Fatal("pipelined create over a delete marker succeeded")
	case err := <-f.Err():
		if !IsConflict(err) {
			t.Fatalf("want a conflict, got %v", err)
		}
	}
	if _, err := st.Save(ctx, s, 0); err != nil {
		t.Fatalf("create over a delete marker: %v", err)
	}
	// And a first write of a new key pipelines fine.
	f, err = st.SaveAsync(New("fresh"), 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ok():
	case err := <-f.Err():
		t.Fatal(err)
	}
}

func TestDueMarks(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b-1", "c_2"} {
		if err := st.MarkDue(id); err != nil {
			t.Fatal(err)
		}
	}
	// A session whose id looks like the prefix cannot collide: '=' is not
	// a session character.
	if _, err := st.Save(ctx, New("due"), 0); err != nil {
		t.Fatal(err)
	}
	<-st.js.PublishAsyncComplete()
	ids, err := st.ListDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b-1", "c_2"}) {
		t.Fatalf("due %v", ids)
	}
	if err := st.ClearDue("b-1"); err != nil {
		t.Fatal(err)
	}
	<-st.js.PublishAsyncComplete()
	if ids, _ = st.ListDue(ctx); !reflect.DeepEqual(ids, []string{"a", "c_2"}) {
		t.Fatalf("after clear: %v", ids)
	}
}
