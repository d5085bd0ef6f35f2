package service

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// viewTestReplay is a loaded replay of n turns, some of them with the
// fillers, repeats and broken-off starts cleaning removes, and some
// with more distinct terms than a view's short list holds.
func viewTestReplay(t *testing.T, n int) []byte {
	t.Helper()
	rp := newReplay(newAnalyzer(), state.DefaultAdmission(), "s", 1)
	for i, d := range benchTurns(n) {
		if i%3 == 0 {
			tu := events.Turn{V: 1, Session: "s", TurnID: fmt.Sprintf("x%05d", i), At: time.Unix(int64(i), 0), Speaker: "Bob", Role: "user",
				Text: fmt.Sprintf("um so so the the w- we shipped build%d uh on on Friday, right?", i)}
			if i%9 == 0 {
				for k := range maxMetList + 5 {
					tu.Text += fmt.Sprintf(" topic%d", k)
				}
			}
			d, _ = json.Marshal(tu)
		}
		rp.apply(uint64(i+1), time.Time{}, events.KindTurn, d)
	}
	blob, err := encodeReplay(nil, "key", rp)
	if err != nil {
		t.Fatal(err)
	}
	_, body, err := indexHeader(blob)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// Views made ahead, on two goroutines, are the views made one by one:
// the same texts and terms, held and counted the same once asked for.
func TestViewsMadeAheadAreTheViewsMadeOnUse(t *testing.T) {
	body := viewTestReplay(t, 400)
	decode := func() *turnIndex {
		rp, err := decodeOwn(body, 0, nil, newAnalyzer(), state.DefaultAdmission(), "s")
		if err != nil {
			t.Fatal(err)
		}
		return rp.idx
	}
	var docs []int
	for d := 0; d < 400; d += 2 {
		docs = append(docs, d)
	}
	onUse, ahead := decode(), decode()
	ahead.view(docs[3]) // made before: not made again
	finish := ahead.viewAhead(append(docs, docs[5]))
	finish()
	if n := len(ahead.views.ahead); n != len(docs)-1 {
		t.Fatalf("%d views made ahead, want %d (those not made yet)", n, len(docs)-1)
	}
	for _, d := range slices.Concat(docs, []int{1, 3, 5}) {
		want, got := onUse.view(d), ahead.view(d)
		if got != want {
			t.Fatalf("doc %d: made ahead %+v, made on use %+v", d, got, want)
		}
	}
	ahead.aheadDone()
	if ahead.bytes != onUse.bytes || len(ahead.views.views) != len(onUse.views.views) {
		t.Fatalf("made ahead: %d bytes, %d views held; made on use: %d bytes, %d views", ahead.bytes, len(ahead.views.views), onUse.bytes, len(onUse.views.views))
	}
	for d, v := range onUse.views.views {
		if ahead.views.views[d] != v {
			t.Fatalf("doc %d held as %+v made ahead, %+v made on use", d, ahead.views.views[d], v)
		}
	}
}

// An analyzer read by several goroutines at once, each meeting tokens
// not cached yet, gives each the terms one alone gives.
func TestAnalyzerReadAtOnce(t *testing.T) {
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = fmt.Sprintf("Running runners ran %d times; the batteries' design%d isn't designed for design%d", i, i%7, i%5)
	}
	terms := func(an *analyzer, text string) []string {
		var out []string
		an.each(text, func(t string) { out = append(out, t) })
		return out
	}
	alone := newAnalyzer()
	want := make([][]string, len(texts))
	for i, text := range texts {
		want[i] = terms(alone, text)
	}
	shared := newAnalyzer()
	var wg sync.WaitGroup
	got := make([][][]string, 4)
	for g := range got {
		got[g] = make([][]string, len(texts))
		wg.Go(func() {
			for i, text := range texts {
				got[g][i] = terms(shared, text)
			}
		})
	}
	wg.Wait()
	for g := range got {
		for i := range texts {
			if !slices.Equal(got[g][i], want[i]) {
				t.Fatalf("goroutine %d, %q: %q, want %q", g, texts[i], got[g][i], want[i])
			}
		}
	}
}
