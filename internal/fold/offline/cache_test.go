package offline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/foldstream/foldstream/internal/fold"
)

// rollingRequests folds a synthetic session in batches of 10 with s and
// returns every request (each carrying the previous output forward).
func rollingRequests(t *testing.T, s *Summarizer, seed uint64, n int, profile fold.Profile) []fold.Request {
	t.Helper()
	ts, notes := synthSession(seed, n)
	var reqs []fold.Request
	summary, ni := "", 0
	for c := 0; c < len(ts); c += 10 {
		b := ts[c:min(c+10, len(ts))]
		var bn []fold.Note
		for ni < len(notes) && !notes[ni].At.After(b[len(b)-1].At) {
			bn = append(bn, notes[ni])
			ni++
		}
		req := fold.Request{Profile: profile, PreviousSummary: summary, Turns: b, Notes: bn, MaxChars: 1200}
		reqs = append(reqs, req)
		res, err := s.Summarize(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		summary = res.Summary
	}
	return reqs
}

// The sentence cache only saves work: a Summarizer that has seen the
// session gives what a fresh one gives, fold after fold.
func TestSentenceCacheDoesNotChangeOutput(t *testing.T) {
	shared := New()
	for _, profile := range []fold.Profile{fold.ProfileVoice, fold.ProfileAgent} {
		for _, req := range rollingRequests(t, shared, 4, 300, profile) {
			warm, _ := shared.Summarize(context.Background(), req)
			cold, _ := New().Summarize(context.Background(), req)
			if warm.Summary != cold.Summary {
				t.Fatalf("cached result differs:\n%q\n%q", warm.Summary, cold.Summary)
			}
		}
	}
}

// Sessions folded concurrently through one Summarizer get what they get
// alone.
func TestSentenceCacheConcurrentSessions(t *testing.T) {
	want := map[uint64][]string{}
	for seed := uint64(1); seed <= 4; seed++ {
		for _, req := range rollingRequests(t, New(), seed, 200, fold.ProfileVoice) {
			res, _ := New().Summarize(context.Background(), req)
			want[seed] = append(want[seed], res.Summary)
		}
	}
	s := New()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for seed := uint64(1); seed <= 4; seed++ {
		reqs := rollingRequests(t, New(), seed, 200, fold.ProfileVoice)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, req := range reqs {
				res, _ := s.Summarize(context.Background(), req)
				if res.Summary != want[seed][i] {
					errs <- fmt.Errorf("session %d fold %d differs", seed, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSentenceCacheBounded(t *testing.T) {
	c := newSentCache(4)
	who := newNames("Alice")
	for i := 0; i < 50; i++ {
		c.prevSentences([]string{fmt.Sprintf("Alice said %d.", i)}, who, false)
		if n := len(c.cur) + len(c.old); n > 8 {
			t.Fatalf("%d entries, want at most 8", n)
		}
	}
	// a recent sentence is a hit: the same value, not a recomputation
	a := c.prevSentences([]string{"Alice said 49."}, who, false)[0]
	if b := c.prevSentences([]string{"Alice said 49."}, who, false)[0]; a != b {
		t.Error("recent sentence not cached")
	}
	// the context is part of the key
	if b := c.prevSentences([]string{"Alice said 49."}, who, true)[0]; a == b {
		t.Error("agent analysis shared with voice analysis")
	}
	if b := c.prevSentences([]string{"Alice said 49."}, newNames("Bob"), false)[0]; a == b {
		t.Error("analysis shared across participant sets")
	}
}

// Cached sentences are copies: the cache must not keep whole previous
// summaries (up to 80 KB each) alive.
func TestSentenceCacheCopiesSentences(t *testing.T) {
	summary := strings.Repeat("Alice said the plan is set. ", 50)
	c := newSentCache(8)
	c.prevSentences(splitSentences(summary), newNames("Alice"), false)
	lo := uintptr(unsafe.Pointer(unsafe.StringData(summary)))
	hi := lo + uintptr(len(summary))
	for k, ps := range c.cur {
		for _, s := range append([]string{k.text}, ps.toks.toks...) {
			if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p >= lo && p < hi {
				t.Fatalf("cache entry %q points into the summary", s)
			}
		}
	}
}

// TestHeldCacheKeysOnNames: the period lines' buckets come from the cache
// only for the same lines and the same participants (a participant's name
// is no token), and equal what the lines' text gives computed afresh.
func TestHeldCacheKeysOnNames(t *testing.T) {
	lines := []string{"From 20:20 to 21:01, Carol and Alice discussed Venom, dive comp and Marvel Rivals.",
		"From 21:01 to 21:30, Alice and Dave discussed Venom, Klyntar and the cup."}
	fresh := func(lines []string, who names) []uint16 {
		return appendBuckets(nil, appendTokenSet(nil, strings.Fields(strings.Join(lines, " ")), who))
	}
	c := newHeldCache(1) // (a second line moves the first to the old generation)
	withCarol, without := newNames("Carol", "Alice"), newNames("Alice")
	if slices.Equal(fresh(lines, withCarol), fresh(lines, without)) {
		t.Fatal("the names do not change the buckets: the test shows nothing")
	}
	for i, who := range []names{withCarol, without, withCarol, withCarol, without} {
		for _, ls := range [][]string{lines[:1], lines, lines[1:], lines} {
			if got, want := c.appendBuckets(nil, strings.Join(ls, " "), ls, who, false), fresh(ls, who); !slices.Equal(got, want) {
				t.Errorf("call %d, %d lines: %v, want %v", i, len(ls), got, want)
			}
		}
	}
}

// TestPeriodCacheHandsOutCopies: a cached period line parses as
// parsePeriod does, and a fold that changes the period it got (as
// summarize does) does not change what the next fold gets.
func TestPeriodCacheHandsOutCopies(t *testing.T) {
	const line = "From 20:20 to 21:01, Carol and Alice discussed Venom, dive comp and Marvel Rivals."
	who := newNames("Carol", "Alice")
	want, ok := parsePeriod(line, who)
	if !ok {
		t.Fatal("the line is no period line: the test shows nothing")
	}
	c := newPeriodCache(4)
	ctx := sentContext(who, false)
	for i := range 3 {
		p, ok := c.parse(line, who, ctx)
		if !ok || p.render() != want.render() || !slices.Equal(p.phrases, want.phrases) || !slices.Equal(p.names, want.names) {
			t.Fatalf("fold %d: %+v, %v; want %+v", i, p, ok, want)
		}
		p.to = "23:59"
		p.phrases[0], p.names[0] = "changed", "Someone"
		p.phrases = append(p.phrases[:1], "more")
	}
	if p, ok := c.parse("Alice said Venom is fun.", who, ctx); ok || p != nil {
		t.Errorf("a statement parsed as a period line: %+v", p)
	}
}
