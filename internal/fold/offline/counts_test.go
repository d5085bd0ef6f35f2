package offline

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/foldstream/foldstream/internal/fold"
)

// parseCounts reads what wordCounts.String writes: the counts and the
// floor; a word said once is written alone, never with ":1".
func parseCounts(t *testing.T, s string) (map[string]int, int) {
	t.Helper()
	n, floor := map[string]int{}, 0
	for _, f := range strings.Fields(s) {
		w, c, ok := strings.Cut(f, ":")
		k, err := strconv.Atoi(c)
		if !ok {
			k, err = 1, nil
		}
		if _, dup := n[w]; err != nil || dup || ok && w != "" && k == 1 {
			t.Fatalf("pair %q of %q", f, s)
		}
		if w == "" {
			floor = k
		} else {
			n[w] = k
		}
	}
	return n, floor
}

// The word counts write what counting every statement writes, fold after
// fold, past the prune (the least said forgotten, ties by word) and from
// pairs read in any order (or twice), and a reused wordCounts keeps
// nothing of the state it read before.
func TestWordCountsWriteWhatWasCounted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return "w" + strconv.Itoa(rng.IntN(900)) }
	spare := &wordCounts{lx: new(lexicon)}
	voc := ""
	model := map[string]int{}
	floor := 0
	for fold := range 60 {
		v := spare.read(voc, nil)
		var ss []stmt
		for range rng.IntN(12) {
			var ts []string
			for range 1 + rng.IntN(6) {
				if w := word(); !slices.Contains(ts, w) {
					ts = append(ts, w)
				}
			}
			ss = append(ss, stmt{Terms: strings.Join(ts, " ")})
		}
		seen := map[string]bool{}
		for _, x := range ss {
			if seen[x.Terms] {
				continue
			}
			seen[x.Terms] = true
			for _, w := range strings.Fields(x.Terms) {
				if _, ok := model[w]; !ok {
					model[w] = floor / 2
				}
				model[w]++
			}
		}
		v.add(ss)
		if len(model) > 2*maxVocab {
			es := []countEntry{}
			for w, c := range model {
				es = append(es, countEntry{t: w, c: int32(c)})
			}
			slices.SortFunc(es, compareCounts)
			floor = int(es[maxVocab].c)
			for _, e := range es[maxVocab:] {
				delete(model, e.t)
			}
		}
		got := v.String()
		if n, f := parseCounts(t, got); !maps.Equal(n, model) || f != floor {
			t.Fatalf("fold %d: counts written\n%s\nwant\n%v (floor %d)", fold, got, model, floor)
		}
		for w, c := range model {
			if v.weight(v.id(w)) != math.Log2(1+float64(max(c, 1)))-0.8 {
				t.Fatalf("fold %d: weight of %s differs", fold, w)
			}
		}
		voc = got
		spare = v.release()
	}
	// Pairs out of order, a word twice (the last count holds), a word said
	// once alone or, as an older state wrote it, with ":1".
	v := (&wordCounts{lx: new(lexicon)}).read("b:1 a:5 :4 c:2 b:3 b:7 d e:1", nil)
	if n, f := parseCounts(t, v.String()); !maps.Equal(n, map[string]int{"a": 5, "b": 7, "c": 2, "d": 1, "e": 1}) || f != 4 || v.size != 5 {
		t.Errorf("pairs written as %q (%d words)", v.String(), v.size)
	}
}

// After 2^32 folds on one scratch its fold stamp wraps; words stamped long ago, or never, must not read as numbered in
// the fold after.
func TestFoldStampWraps(t *testing.T) {
	v := (&wordCounts{lx: new(lexicon)}).read("alpha:2", nil)
	v.fold = math.MaxUint32 // as after 2^32 - 1 folds
	v.read("alpha:2 beta:5 gamma", nil)
	if n, _ := parseCounts(t, v.String()); !maps.Equal(n, map[string]int{"alpha": 2, "beta": 5, "gamma": 1}) || v.size != 3 {
		t.Errorf("counts after the stamp wrapped: %q (%d words)", v.String(), v.size)
	}
}

// Counts carried from the fold that wrote them (String's back) read as reading
// what it wrote: the same words by the same numbers, counts and floor, a
// word with ':' left out as read leaves it out; once the lexicon started
// over, the words are read again.
func TestCountsReadBackReadAsWritten(t *testing.T) {
	v := (&wordCounts{lx: new(lexicon)}).read(":3 alpha:4 beta gamma:9", nil)
	v.add([]stmt{{Terms: "delta alpha odd:word"}, {Terms: "beta epsilon"}})
	s := v.String()
	want := (&wordCounts{lx: new(lexicon)}).read(s, nil)
	written := func(w *wordCounts) (out []string) {
		for id, c := range w.n {
			out = append(out, w.words[id].w+"="+strconv.Itoa(int(c)))
		}
		return append(out, strconv.Itoa(w.floor), strconv.Itoa(w.size))
	}
	r := v.back
	if r == nil || r.s != s {
		t.Fatalf("String kept no read of %q", s)
	}
	if got := written(v.read(s, r)); !slices.Equal(got, written(want)) {
		t.Errorf("carried counts read as %v, want %v", got, written(want))
	}
	if !strings.Contains(" "+s, " odd:word:") || slices.ContainsFunc(r.words, func(k *known) bool { return k.w == "odd:word" }) {
		t.Errorf("%q carried as %d words: want odd:word written, not carried", s, len(r.words))
	}
	v.lx.m, v.lx.near, v.lx.gen = nil, [len(v.lx.near)]*known{}, v.lx.gen+1 // (as trim does)
	if got := written(v.read(s, r)); !slices.Equal(got, written(want)) || v.words[0] == r.words[0] {
		t.Errorf("after the lexicon started over: %v, want %v read afresh", got, written(want))
	}
}

// A statement's terms are numbered fold after fold as id numbers their
// words: in the next fold, once its Terms changed, and once the lexicon
// started over.
func TestTermIDsFromFoldToFold(t *testing.T) {
	v := (&wordCounts{lx: new(lexicon)}).read("alpha:2 gamma", nil)
	x := stmt{Text: "Beta, alpha.", Terms: "beta alpha"}
	check := func(when string, want ...string) {
		t.Helper()
		ids := v.termIDs(&x)
		var got []string
		for i, id := range ids {
			if got = append(got, v.words[id].w); id != v.id(want[min(i, len(want)-1)]) {
				t.Errorf("%s: %q numbered %d, id gives %d", when, want[i], id, v.id(want[i]))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: terms %v, want %v", when, got, want)
		}
	}
	check("found", "beta", "alpha")
	v.read("gamma:3 alpha:2", nil)
	x.ids = nil
	check("next fold", "beta", "alpha")
	v.read("gamma:3", nil)
	x.ids, x.Terms = nil, "delta beta"
	check("changed", "delta", "beta")
	v.lx.m, v.lx.near, v.lx.gen = nil, [len(v.lx.near)]*known{}, v.lx.gen+1 // (as trim does)
	v.read("gamma:3", nil)
	x.ids = nil
	check("after the lexicon started over", "delta", "beta")
}

// Sessions folded at once, each from the state its last fold kept, fold as
// from decoded copies of their states: the counts a kept state carries (and
// the room a fold writes them in) are its own, whichever scratch folds it
// next and whatever the scratch folded in between (with -race, room two
// folds write at once is a race).
func TestKeptCountsOfSessionsFoldedAtOnce(t *testing.T) {
	kept, decoded := New(), New()
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for s := range uint64(4) {
		wg.Go(func() {
			ts, notes := synthSession(11+s, 200)
			var k, d fold.Outcome
			for i, ni := 0, 0; i < len(ts); i += 10 {
				b := ts[i:min(i+10, len(ts))]
				var bn []fold.Note
				for ; ni < len(notes) && !notes[ni].At.After(b[len(b)-1].At); ni++ {
					bn = append(bn, notes[ni])
				}
				req := fold.Request{Session: fmt.Sprint("s", s), Profile: fold.ProfileVoice, Turns: b, Notes: bn, MaxChars: 1200}
				kreq, dreq := req, req
				kreq.PreviousSummary, kreq.PreviousState = k.Summary, k.State
				dreq.PreviousSummary, dreq.PreviousState = d.Summary, bytes.Clone(d.State)
				var err error
				if k, err = fold.Summarize(context.Background(), kept, kreq); err == nil {
					d, err = fold.Summarize(context.Background(), decoded, dreq)
				}
				if err == nil && (k.Summary != d.Summary || !bytes.Equal(k.State, d.State)) {
					err = fmt.Errorf("session %d, turns %d-%d: from the kept state\n%s\n%s\nfrom the decoded one\n%s\n%s", s, i, i+len(b)-1, k.Summary, k.State, d.Summary, d.State)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
