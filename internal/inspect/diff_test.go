package inspect

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// apply rebuilds both sides from a diff: the kept and dropped runs must
// give the previous text, the kept and added runs the current one.
func apply(ops []DiffOp) (prev, cur string) {
	var p, c []string
	for _, op := range ops {
		switch op.Op {
		case "=":
			p, c = append(p, op.Text), append(c, op.Text)
		case "-":
			p = append(p, op.Text)
		case "+":
			c = append(c, op.Text)
		}
	}
	return strings.Join(p, " "), strings.Join(c, " ")
}

func TestWordDiff(t *testing.T) {
	ops := WordDiff("Alice booked a table for four at Nino's on Friday.", "Alice booked a table for six at Nino's on Saturday. Bob pays.")
	want := []DiffOp{
		{"=", "Alice booked a table for"}, {"-", "four"}, {"+", "six"}, {"=", "at Nino's on"},
		{"-", "Friday."}, {"+", "Saturday. Bob pays."},
	}
	if len(ops) != len(want) {
		t.Fatalf("got %d runs %v, want %v", len(ops), ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Errorf("run %d: got %+v, want %+v", i, ops[i], want[i])
		}
	}
	if got := WordDiff("", "a b"); len(got) != 1 || got[0] != (DiffOp{"+", "a b"}) {
		t.Errorf("first version: got %v, want one added run", got)
	}
	if got := WordDiff("same words", "same  words"); len(got) != 1 || got[0].Op != "=" {
		t.Errorf("whitespace only: got %v, want one kept run", got)
	}
}

// TestWordDiffMinimal checks on random texts that the diff rebuilds both
// sides and that its kept words are a longest common subsequence (the
// edit script is minimal), against a plain dynamic-programming LCS.
func TestWordDiffMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	vocab := strings.Fields("a b c d e f g")
	words := func() []string {
		w := make([]string, rng.IntN(30))
		for i := range w {
			w[i] = vocab[rng.IntN(len(vocab))]
		}
		return w
	}
	for i := 0; i < 500; i++ {
		a, b := words(), words()
		ops := wordDiff(a, b)
		p, c := apply(ops)
		if p != strings.Join(a, " ") || c != strings.Join(b, " ") {
			t.Fatalf("case %d: diff %v does not rebuild %q → %q", i, ops, a, b)
		}
		kept := 0
		for _, op := range ops {
			if op.Op == "=" {
				kept += len(strings.Fields(op.Text))
			}
		}
		if want := lcs(a, b); kept != want {
			t.Fatalf("case %d: %d words kept, the longest common subsequence has %d (%q → %q)", i, kept, want, a, b)
		}
	}
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}
