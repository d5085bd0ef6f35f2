package processor

import (
	"fmt"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

func TestPayloadsKeepAFoldsBatch(t *testing.T) {
	var ps payloads
	// Turns at odd sequences, notes at multiples of 10, in stream order.
	for seq := uint64(1); seq <= 40; seq++ {
		if seq%2 == 1 || seq%10 == 0 {
			ps.add(seq, []byte(fmt.Sprint(seq)))
		}
	}
	if got := string(ps.get(21)); got != "21" {
		t.Errorf("get(21) = %q", got)
	}
	if ps.get(22) != nil {
		t.Error("get(22): never kept, want nil")
	}
	turns := []state.TurnRef{{Seq: 1}, {Seq: 3}, {Seq: 5}, {Seq: 99}}
	notes := []state.NoteRef{{Seq: 10}}
	batch := ps.of(turns, notes)
	if len(batch) != 4 || batch[0].seq != 1 || batch[3].seq != 10 || string(batch.get(10)) != "10" {
		t.Errorf("of: %v", batch)
	}
	ps.drop(turns, notes)
	for _, seq := range []uint64{1, 3, 5, 10} {
		if ps.get(seq) != nil {
			t.Errorf("seq %d kept after drop", seq)
		}
	}
	for _, seq := range []uint64{7, 20, 39, 40} {
		if ps.get(seq) == nil {
			t.Errorf("seq %d dropped, want kept", seq)
		}
	}
	var full payloads
	for seq := range uint64(maxPayloads + 10) {
		full.add(seq+1, []byte("x"))
	}
	if len(full) != maxPayloads || full.get(maxPayloads+1) != nil {
		t.Errorf("cap: %d kept", len(full))
	}
}

// A turn is kept decoded, a note raw; a fold's batch carries both as kept.
func TestPayloadsKeepTurnsDecoded(t *testing.T) {
	var ps payloads
	turn := &events.Turn{TurnID: "t-5", Text: "hello"}
	ps.addTurn(5, turn)
	ps.add(6, []byte(`{"note_id":"n-6"}`))
	batch := ps.of([]state.TurnRef{{Seq: 5}}, []state.NoteRef{{Seq: 6}})
	if p, ok := batch.at(5); !ok || p.turn != turn || p.data != nil {
		t.Errorf("at(5) = %+v, %v; want the decoded turn", p, ok)
	}
	if got := string(batch.get(6)); got != `{"note_id":"n-6"}` {
		t.Errorf("get(6) = %q", got)
	}
	if batch.get(5) != nil {
		t.Error("get(5): a decoded turn has no raw event, want nil")
	}
	if _, ok := batch.at(7); ok {
		t.Error("at(7): never kept")
	}
	if n := ps[0].heapSize(); n < len("t-5hello") {
		t.Errorf("heapSize of a kept turn = %d", n)
	}
}
