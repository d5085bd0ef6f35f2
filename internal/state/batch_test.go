package state

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/nats-io/nats.go/jetstream"
)

// LoadMany reads what Load reads, session by session: written checkpoints
// with their revisions, fresh states for missing and deleted ones, and
// checkpoints with sealed chunks in full.
func TestLoadManyMatchesLoad(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		ids = append(ids, id)
		if i%4 == 3 {
			continue // never written
		}
		s := New(id)
		for j := range i + 1 {
			s.AddTurn(uint64(100*i+j), TurnRef{Seq: uint64(100*i + j), At: int64(j)})
		}
		s.Summary = "summary of " + id
		if i%3 == 0 {
			s.SummaryState = offlineLikeState(30 + i)
		}
		rev, err := st.Save(ctx, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			s.Total++ // a second revision
			if _, err := st.Save(ctx, s, rev); err != nil {
				t.Fatal(err)
			}
		}
		if i == 10 {
			if err := st.Delete(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One with sealed chunks: LoadMany must put its refs back too.
	big := New("big")
	big.SummaryState = offlineLikeState(50)
	for i := range 3000 {
		big.AddTurn(uint64(i), TurnRef{Seq: uint64(10 + i), At: int64(i)})
	}
	rev, err := st.Save(ctx, big, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Seal(ctx, big); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Save(ctx, big, rev); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, "big")

	// The batch itself answers (not a fallback to Load): every written,
	// undeleted checkpoint, in one request.
	found, err := st.multiLast(ctx, ids)
	if err != nil {
		t.Fatalf("multi_last direct get: %v", err)
	}
	if len(found) != 30-1+1 { // 30 written, one deleted, plus big
		t.Errorf("direct get found %d checkpoints, want 30", len(found))
	}

	got := st.LoadMany(ctx, ids)
	if len(got) != len(ids) {
		t.Fatalf("%d results for %d ids", len(got), len(ids))
	}
	for i, l := range got {
		if l.ID != ids[i] || l.Err != nil {
			t.Fatalf("result %d: id %s err %v", i, l.ID, l.Err)
		}
		want, wantRev, err := st.Load(ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if l.Rev != wantRev || !reflect.DeepEqual(l.S, want) {
			t.Errorf("%s: LoadMany revision %d state %+v; Load revision %d state %+v", l.ID, l.Rev, l.S, wantRev, want)
		}
		// The summarizer state as stored comes with it, for the next checkpoint.
		if (l.Text != nil) != (len(l.S.SummaryState) > 0) || l.Text != nil && len(l.Text.stored) == 0 {
			t.Errorf("%s: a state of %d bytes loaded with its stored form %+v", l.ID, len(l.S.SummaryState), l.Text)
		} else if l.Text != nil {
			plain, _ := l.S.Encode(nil)
			if reused, _ := l.S.EncodeReusing(nil, l.Text); string(reused) != string(plain) {
				t.Errorf("%s: the next checkpoint with the stored form as read differs from one written afresh", l.ID)
			}
		}
	}
	if got[3].Rev != 0 || got[10].Rev != 0 || got[10].S.Total != 0 {
		t.Errorf("missing or deleted sessions must load fresh: %+v %+v", got[3], got[10])
	}
	if len(got[len(got)-1].S.Turns) != 3000 {
		t.Errorf("sealed session loaded with %d refs, want 3000", len(got[len(got)-1].S.Turns))
	}
}

// A bucket whose stream does not answer direct gets (created by hand, or
// by an older tool) is read key by key, with the same results.
func TestLoadManyWithoutDirectGets(t *testing.T) {
	e := brokertest.Start(t, brokertest.Options{})
	ctx := context.Background()
	if _, err := e.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name: "KV_nodirect", Subjects: []string{"$KV.nodirect.>"}, MaxMsgsPerSubject: 1,
		AllowRollup: true, DenyDelete: true, AllowDirect: false,
	}); err != nil {
		t.Fatal(err)
	}
	kv, err := e.JS.KeyValue(ctx, "nodirect")
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(e.JS, kv)
	s := New("a")
	s.AddTurn(1, TurnRef{Seq: 7})
	rev, err := st.Save(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.multiLast(ctx, []string{"a"}); !errors.Is(err, errNoDirect) {
		t.Fatalf("multi_last on a bucket without direct gets: %v, want errNoDirect", err)
	}
	got := st.LoadMany(ctx, []string{"a", "b"})
	if got[0].Err != nil || got[0].Rev != rev || got[0].S.Total != 1 || got[1].Err != nil || got[1].Rev != 0 || got[1].S.Total != 0 {
		t.Fatalf("LoadMany: %+v %+v", got[0], got[1])
	}
}
