package processor

import (
	"fmt"
	"testing"

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
