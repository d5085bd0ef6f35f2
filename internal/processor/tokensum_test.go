package processor

import (
	"math/rand/v2"
	"testing"

	"github.com/foldstream/foldstream/internal/state"
)

// recount is what the memo replaces: the unfolded turns' tokens, summed.
func recount(s *state.Session) int {
	n := 0
	for _, t := range s.Turns {
		n += t.Tokens
	}
	return n
}

// The memoized sum always equals a full recount, whatever mix of appended
// turns, folds (the cursor moves, the head is trimmed) and resets.
func TestUnfoldedTokenSumFollowsTheSession(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	ls := &live{s: state.New("s")}
	seq := uint64(0)
	for step := range 5000 {
		s := ls.s
		for range 1 + rng.IntN(6) { // several changes between two checks
			switch r := rng.IntN(100); {
			case r < 80:
				seq++
				s.AddTurn(seq, state.TurnRef{Seq: seq, Tokens: rng.IntN(50)})
			case r < 97:
				if n := int64(len(s.Turns)); n > 0 {
					s.Advance(s.Cursor+1+rng.Int64N(n), 0)
				}
			default:
				s.Reset()
			}
		}
		if got, want := ls.unfoldedTokens(), recount(s); got != want {
			t.Fatalf("step %d: memoized %d, recount %d (cursor %d, %d turns)", step, got, want, s.Cursor, len(s.Turns))
		}
	}
}
