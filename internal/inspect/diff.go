package inspect

import "strings"

// DiffOp is one run of a word diff: Op "=" (kept), "-" (dropped from the
// previous version) or "+" (new in this one), and the run's words joined
// by single spaces.
type DiffOp struct {
	Op   string `json:"op"`
	Text string `json:"text"`
}

// maxDiffD bounds the edit distance the diff searches (memory grows with
// its square); texts further apart than that are shown as replaced whole,
// which is what a reader sees anyway when nearly every word changed.
const maxDiffD = 1500

// WordDiff diffs two texts word by word (whitespace-separated tokens, so
// punctuation stays attached to its word) with Myers' O(ND) algorithm: the
// shortest edit script, the runs a reader expects from a diff tool.
func WordDiff(prev, cur string) []DiffOp {
	return wordDiff(strings.Fields(prev), strings.Fields(cur))
}

func wordDiff(a, b []string) []DiffOp {
	// Trim the common prefix and suffix first: consecutive summary
	// versions usually share long runs, and the search is then only over
	// the changed middle.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out diffBuilder
	out.add("=", a[:pre]...)
	mid := myers(a[pre:len(a)-suf], b[pre:len(b)-suf])
	for _, op := range mid {
		out.add(op.op, op.word)
	}
	out.add("=", a[len(a)-suf:]...)
	return out.ops
}

type wordOp struct {
	op   string
	word string
}

// myers returns the edit script from a to b, word by word, in order.
func myers(a, b []string) []wordOp {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	// v[k+off] is the furthest x reached on diagonal k; trace[d] is v as it
	// was before step d, restricted to diagonals -d..d (index k+d).
	off := n + m
	v := make([]int, 2*(n+m)+2)
	var trace [][]int
	for d := 0; d <= n+m && d <= maxDiffD; d++ {
		snap := make([]int, 2*d+1)
		copy(snap, v[off-d:off+d+1])
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: insert b[y]
			} else {
				x = v[off+k-1] + 1 // right: delete a[x]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, d)
			}
		}
	}
	return replaceAll(a, b)
}

func backtrack(a, b []string, trace [][]int, dEnd int) []wordOp {
	var rev []wordOp
	x, y := len(a), len(b)
	for d := dEnd; d > 0; d-- {
		v := trace[d] // diagonal k is at index k+d
		k := x - y
		var pk int
		if k == -d || (k != d && v[k-1+d] < v[k+1+d]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[pk+d]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, wordOp{"=", a[x]})
		}
		if x == px {
			y--
			rev = append(rev, wordOp{"+", b[y]})
		} else {
			x--
			rev = append(rev, wordOp{"-", a[x]})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, wordOp{"=", a[x]})
	}
	out := make([]wordOp, len(rev))
	for i, op := range rev {
		out[len(rev)-1-i] = op
	}
	return out
}

func replaceAll(a, b []string) []wordOp {
	out := make([]wordOp, 0, len(a)+len(b))
	for _, w := range a {
		out = append(out, wordOp{"-", w})
	}
	for _, w := range b {
		out = append(out, wordOp{"+", w})
	}
	return out
}

// diffBuilder merges consecutive words of the same op into one run.
type diffBuilder struct{ ops []DiffOp }

func (d *diffBuilder) add(op string, words ...string) {
	if len(words) == 0 {
		return
	}
	if n := len(d.ops); n > 0 && d.ops[n-1].Op == op {
		d.ops[n-1].Text += " " + strings.Join(words, " ")
		return
	}
	d.ops = append(d.ops, DiffOp{Op: op, Text: strings.Join(words, " ")})
}
