package processor

import (
	"testing"

	"github.com/nats-io/nuid"
)

// An engine deletes every consumer it takes for its own at attach, so the
// names it takes must be exactly its configured one and the fresh names it
// makes from it: never another partition's, never a consumer that only
// starts like it.
func TestOwnConsumerNames(t *testing.T) {
	id := nuid.Next()
	for _, c := range []struct {
		base, name string
		own        bool
	}{
		{"foldstream", "foldstream", true},
		{"foldstream", "foldstream-r" + id, true},
		{"foldstream", "foldstream-rollup", false},
		{"foldstream", "foldstream-r" + id + "x", false},
		{"foldstream", "foldstream-r" + id[:21] + "-", false},
		{"foldstream", "foldstream-p1of6", false},
		{"foldstream", "foldstream-p1of6-r" + id, false},
		{"foldstream-p1of6", "foldstream-p1of6-r" + id, true},
		{"foldstream-p1of6", "foldstream-p1of60-r" + id[1:], false},
		{"foldstream-p1of6", "foldstream", false},
		{"foldstream", "heal-probe", false},
	} {
		if got := ownConsumerName(c.base, c.name); got != c.own {
			t.Errorf("ownConsumerName(%q, %q) = %v, want %v", c.base, c.name, got, c.own)
		}
	}
}
