package fold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/retry"
)

// scripted is a test-only Summarizer answering from a list; the budget
// policy is backend-agnostic, so no HTTP is involved here.
type scripted struct {
	replies []scriptedReply
	reqs    []Request
}

type scriptedReply struct {
	res Result
	err error
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) Summarize(_ context.Context, req Request) (Result, error) {
	s.reqs = append(s.reqs, req)
	if len(s.reqs) > len(s.replies) {
		return Result{}, errors.New("scripted: unexpected call")
	}
	r := s.replies[len(s.reqs)-1]
	return r.res, r.err
}

func ok(summary string, mems ...string) scriptedReply {
	return scriptedReply{res: Result{Summary: summary, Memories: mems, Model: "m1", InputTokens: 100, OutputTokens: 10}}
}

func budgetReq(max int) Request {
	return Request{Session: "s1", Profile: ProfileAgent, MaxChars: max, PreviousSummary: "old",
		Turns: []Turn{{Index: 0, Speaker: "Alice", Role: "user", Text: "hi"}}}
}

func TestBudgetFull(t *testing.T) {
	s := &scripted{replies: []scriptedReply{ok("  Alice greeted Bob.  ", "Alice likes tea")}}
	out, err := Summarize(context.Background(), s, budgetReq(100))
	if err != nil {
		t.Fatal(err)
	}
	want := Outcome{Summary: "Alice greeted Bob.", Tier: TierFull, Memories: []string{"Alice likes tea"},
		Model: "m1", InputTokens: 100, OutputTokens: 10, Calls: 1}
	if !outcomeEqual(out, want) {
		t.Fatalf("got %+v, want %+v", out, want)
	}
}

func TestBudgetRecompacted(t *testing.T) {
	long := strings.Repeat("Alice talked about the Tokyo map. ", 10) // 340 chars
	s := &scripted{replies: []scriptedReply{
		ok(long, "Alice likes tea", "Bob mains Hulk"),
		{res: Result{Summary: "Alice talked about the Tokyo map at length.", Memories: []string{"Bob mains Hulk", "James lives in Oslo"},
			Model: "m2", InputTokens: 50, OutputTokens: 5}},
	}}
	req := budgetReq(100)
	out, err := Summarize(context.Background(), s, req)
	if err != nil {
		t.Fatal(err)
	}
	want := Outcome{Summary: "Alice talked about the Tokyo map at length.", Tier: TierRecompacted,
		Memories: []string{"Alice likes tea", "Bob mains Hulk", "James lives in Oslo"},
		Model:    "m2", InputTokens: 150, OutputTokens: 15, Calls: 2}
	if !outcomeEqual(out, want) {
		t.Fatalf("got %+v, want %+v", out, want)
	}
	re := s.reqs[1]
	if !re.Recompact || re.PreviousSummary != strings.TrimSpace(long) || re.MaxChars != 100 ||
		re.Session != "s1" || re.Profile != ProfileAgent || len(re.Turns) != 0 || len(re.Notes) != 0 {
		t.Fatalf("re-compaction request = %+v", re)
	}
}

func TestBudgetClampedAfterSecondOverrun(t *testing.T) {
	first := strings.Repeat("Alice talked about the Tokyo map. ", 10)
	second := "Alice talked about Tokyo. Bob kept dying as Hulk. James shared his screen. Clanky suggested Jeff. They queued again."
	s := &scripted{replies: []scriptedReply{ok(first), ok(second)}}
	out, err := Summarize(context.Background(), s, budgetReq(80))
	if err != nil {
		t.Fatal(err)
	}
	if out.Tier != TierClamped || out.Calls != 2 {
		t.Fatalf("tier %s calls %d", out.Tier, out.Calls)
	}
	// The shorter (re-compacted) answer is clamped at a sentence end.
	if out.Summary != "Alice talked about Tokyo. Bob kept dying as Hulk. James shared his screen." {
		t.Fatalf("summary = %q", out.Summary)
	}
}

func TestBudgetRecompactionFailureClampsFirst(t *testing.T) {
	first := "Alice talked about Tokyo. Bob kept dying as Hulk. James shared his screen. Clanky suggested Jeff."
	for name, second := range map[string]scriptedReply{
		"error": {err: retry.New(retry.Timeout, context.DeadlineExceeded)},
		"empty": ok("   "),
	} {
		t.Run(name, func(t *testing.T) {
			s := &scripted{replies: []scriptedReply{ok(first, "a"), second}}
			out, err := Summarize(context.Background(), s, budgetReq(60))
			if err != nil {
				t.Fatalf("budget pass lost the fold: %v", err)
			}
			if out.Tier != TierClamped || out.Summary != "Alice talked about Tokyo. Bob kept dying as Hulk." || out.Calls != 2 {
				t.Fatalf("got %+v", out)
			}
			if !slices.Equal(out.Memories, []string{"a"}) {
				t.Fatalf("memories = %q", out.Memories)
			}
		})
	}
}

func TestBudgetFirstCallErrors(t *testing.T) {
	backendErr := retry.New(retry.RateLimited, errors.New("429"))
	s := &scripted{replies: []scriptedReply{{err: backendErr}}}
	_, err := Summarize(context.Background(), s, budgetReq(100))
	var e *retry.Error
	if !errors.As(err, &e) || e != backendErr {
		t.Fatalf("err = %v, want the backend's classified error", err)
	}

	for _, empty := range []string{"", " \n\t "} {
		s := &scripted{replies: []scriptedReply{ok(empty)}}
		_, err := Summarize(context.Background(), s, budgetReq(100))
		if !errors.As(err, &e) || e.Class != retry.InvalidOutput || e.Retryable {
			t.Fatalf("empty summary: err = %v, want invalid_output", err)
		}
		if len(s.reqs) != 1 {
			t.Fatalf("empty first answer triggered %d calls", len(s.reqs))
		}
	}
}

func TestBudgetNoLimit(t *testing.T) {
	s := &scripted{replies: []scriptedReply{ok(strings.Repeat("x ", 1000))}}
	out, err := Summarize(context.Background(), s, budgetReq(0))
	if err != nil || out.Tier != TierFull || out.Calls != 1 {
		t.Fatalf("out %+v err %v", out, err)
	}
}

func TestClampSentence(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"fits", "Short one.", 20, "Short one."},
		{"fits exactly", "Exactly ten", 11, "Exactly ten"},
		{"trims", "  padded.  ", 7, "padded."},
		{"last sentence", "One two. Three four. Five six seven.", 25, "One two. Three four."},
		{"boundary at max", "One two. Three four. Five", 20, "One two. Three four."},
		{"exclaim question", "Wow! Really? Yes indeed it is", 14, "Wow! Really?"},
		{"closing quote", `Bob said "go left." Then he died.`, 22, `Bob said "go left."`},
		{"decimal is not an end", "Version 3.5 works well enough for us today", 30, "Version 3.5 works well enough…"},
		{"boundary too early", "Hi. This is a long sentence without any stop at all", 30, "Hi. This is a long sentence…"},
		{"word trailing comma", "alpha beta, gamma delta epsilon", 13, "alpha beta…"},
		{"one long word", "abcdefghijklmnopqrstuvwxyz", 10, "abcdefghi…"},
		{"max one", "hello world", 1, "…"},
		{"max zero", "hello", 0, ""},
		{"runes not bytes", "Ünïcödé wörds hérè. Ánd mörè tëxt hérè.", 20, "Ünïcödé wörds hérè."},
		{"cjk", "你好世界。这是一个很长的句子没有空格", 8, "你好世界。这是…"},
		{"emoji", "🙂🙂🙂 🙂🙂🙂 🙂🙂🙂", 7, "🙂🙂🙂…"},
		{"newline counts as space", "First line.\nSecond line goes on", 15, "First line."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClampSentence(tt.in, tt.max)
			if got != tt.want {
				t.Fatalf("ClampSentence(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > tt.max && tt.max >= 0 {
				t.Fatalf("result has %d runes > %d", n, tt.max)
			}
		})
	}
}

// TestClampSentenceInvariants sweeps budgets over mixed text: never over
// budget, never empty, never splits a rune.
func TestClampSentenceInvariants(t *testing.T) {
	texts := []string{
		"Alice said hi. Bob said: \"über cool!\" James asked about /srv/data/v1.2? Nobody knew… 日本語のテキスト。 end",
		strings.Repeat("word ", 50),
		strings.Repeat("é", 300),
		"a. b. c. d. e. f.",
	}
	for _, s := range texts {
		for max := 1; max <= utf8.RuneCountInString(s)+2; max++ {
			got := ClampSentence(s, max)
			if got == "" || utf8.RuneCountInString(got) > max || !utf8.ValidString(got) {
				t.Fatalf("ClampSentence(%q, %d) = %q", s, max, got)
			}
		}
	}
}

func outcomeEqual(a, b Outcome) bool {
	return a.Summary == b.Summary && a.Tier == b.Tier && slices.Equal(a.Memories, b.Memories) &&
		a.Model == b.Model && a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens && a.Calls == b.Calls
}

// TestMergeMemoryItemsSmallIsTheSet checks the scan mergeMemoryItems and
// mergeMemories use for a few memories against the set they use for many:
// the same memories kept, in the same order.
func TestMergeMemoryItemsSmallIsTheSet(t *testing.T) {
	ms := []Memory{{ID: "m1", Text: "a"}, {Text: " b "}, {ID: "m1", Text: "c"}, {Text: "b"}, {ID: "\x00b", Text: "d"},
		{Text: "  "}, {ID: "m2", Text: "a"}, {Text: "a"}, {ID: "m2", Text: "e"}}
	var many []Memory
	for i := range smallMerge {
		many = append(many, Memory{ID: fmt.Sprintf("x%d", i), Text: "x"})
	}
	var texts []string
	for _, m := range ms {
		texts = append(texts, m.Text)
	}
	for n := range len(ms) + 1 {
		for k := 0; k <= n; k++ {
			small := mergeMemoryItems(slices.Clone(ms[:k]), ms[k:n])
			large := mergeMemoryItems(append(slices.Clone(many), ms[:k]...), ms[k:n])[len(many):]
			if !slices.Equal(small, large) && !(len(small) == 0 && len(large) == 0) {
				t.Fatalf("mergeMemoryItems(ms[:%d], ms[%d:%d]) = %q, the set gives %q", k, k, n, small, large)
			}
			smallT := mergeMemories(slices.Clone(texts[:k]), texts[k:n])
			largeT := mergeMemories(append(slices.Repeat([]string{"x"}, smallMerge), texts[:k]...), texts[k:n])[smallMerge:]
			if !slices.Equal(smallT, largeT) && !(len(smallT) == 0 && len(largeT) == 0) {
				t.Fatalf("mergeMemories(texts[:%d], texts[%d:%d]) = %q, the set gives %q", k, k, n, smallT, largeT)
			}
		}
	}
	if got := mergeMemoryItems(nil, []Memory{{Text: " "}}); got != nil {
		t.Fatalf("nothing to keep: got %q, want nil", got)
	}
}

// A backend that cannot read the request's state gets it built again from
// the session's earlier turns: they are folded from nothing in batches of
// the request's size, state carried, then the request on what they made;
// their memories are not returned again.
func TestSummarizeRebuildsAnUnreadableState(t *testing.T) {
	withState := func(summary, state string, mems ...string) scriptedReply {
		r := ok(summary, mems...)
		r.res.State = []byte(state)
		return r
	}
	s := &scripted{replies: []scriptedReply{
		{err: Unreadable(errors.New("version 9"))},
		withState("turns 0-1", "s1", "Alice likes tea"),
		withState("turns 0-2", "s2"),
		withState("turns 0-4", "s3", "Bob moved"),
	}}
	earlier := []Turn{{Index: 0, Text: "a"}, {Index: 1, Text: "b"}, {Index: 2, Text: "c"}}
	var why error
	req := Request{Session: "s1", MaxChars: 100, PreviousSummary: "published", PreviousState: []byte("v9"),
		Turns:   []Turn{{Index: 3, Text: "d"}, {Index: 4, Text: "e"}},
		Earlier: func(_ context.Context, w error) ([]Turn, []Note, error) { why = w; return earlier, nil, nil }}
	out, err := Summarize(context.Background(), s, req)
	if err != nil {
		t.Fatal(err)
	}
	if out.Summary != "turns 0-4" || string(out.State) != "s3" || !slices.Equal(out.Memories, []string{"Bob moved"}) {
		t.Fatalf("outcome %+v", out)
	}
	if !errors.Is(why, ErrStateUnreadable) || !strings.Contains(why.Error(), "version 9") {
		t.Fatalf("Earlier told %v", why)
	}
	if len(s.reqs) != 4 {
		t.Fatalf("%d calls, want 4", len(s.reqs))
	}
	for i, want := range []struct {
		first, n      int64
		prev, prevSt  string
		earlierCalled bool
	}{{3, 2, "published", "v9", true}, {0, 2, "", "", false}, {2, 1, "turns 0-1", "s1", false}, {3, 2, "turns 0-2", "s2", false}} {
		r := s.reqs[i]
		if r.Turns[0].Index != want.first || int64(len(r.Turns)) != want.n || r.PreviousSummary != want.prev ||
			string(r.PreviousState) != want.prevSt || (r.Earlier != nil) != want.earlierCalled {
			t.Errorf("call %d: turns from %d (%d), previous %q/%q, Earlier set %v; want %+v",
				i, r.Turns[0].Index, len(r.Turns), r.PreviousSummary, r.PreviousState, r.Earlier != nil, want)
		}
	}
}

// Without the earlier turns (the stream no longer holds them all) the
// request is folded without its state: the backend reads the summary.
func TestSummarizeWithoutTheEarlierTurnsDropsTheState(t *testing.T) {
	s := &scripted{replies: []scriptedReply{{err: Unreadable(errors.New("bad"))}, ok("from prose")}}
	req := budgetReq(100)
	req.PreviousState = []byte("bad")
	req.Earlier = func(context.Context, error) ([]Turn, []Note, error) {
		return nil, nil, errors.New("turns 0 to 5 not in the stream")
	}
	out, err := Summarize(context.Background(), s, req)
	if err != nil || out.Summary != "from prose" {
		t.Fatalf("%+v, %v", out, err)
	}
	if r := s.reqs[1]; r.PreviousState != nil || r.Earlier != nil || r.PreviousSummary != "old" {
		t.Fatalf("second call %+v", r)
	}
	// Without Earlier the backend's error is the fold's.
	s = &scripted{replies: []scriptedReply{{err: Unreadable(errors.New("bad"))}}}
	req.Earlier = nil
	if _, err := Summarize(context.Background(), s, req); !errors.Is(err, ErrStateUnreadable) || len(s.reqs) != 1 {
		t.Fatalf("err %v after %d calls", err, len(s.reqs))
	}
}

// slowRebuild cannot read the state "bad"; folding the earlier turns again
// outlasts any deadline (a long session folded in batches of one), while
// the batch on the summary's prose is answered at once.
type slowRebuild struct{}

func (slowRebuild) Name() string { return "slow" }

func (slowRebuild) Summarize(ctx context.Context, req Request) (Result, error) {
	switch {
	case string(req.PreviousState) == "bad" && req.Earlier != nil:
		return Result{}, Unreadable(errors.New("version 9"))
	case req.Turns[0].Index < 100: // an earlier turn folded again
		<-ctx.Done()
		return Result{}, ctx.Err()
	}
	return Result{Summary: "from prose"}, nil
}

// A state that cannot be built again within the fold's time is given up
// for the summary's prose while there is time left to fold the batch: the
// fold does not fail (and is not retried to fail the same way forever).
func TestRebuildThatOutlastsTheFoldFallsBackToTheProse(t *testing.T) {
	earlier := make([]Turn, 100)
	for i := range earlier {
		earlier[i] = Turn{Index: int64(i), Text: "x"}
	}
	req := Request{Session: "s1", MaxChars: 100, PreviousSummary: "published", PreviousState: []byte("bad"),
		Turns:   []Turn{{Index: 100, Text: "y"}},
		Earlier: func(context.Context, error) ([]Turn, []Note, error) { return earlier, nil, nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := Summarize(ctx, slowRebuild{}, req)
	if err != nil || out.Summary != "from prose" {
		t.Fatalf("%+v, %v: want the batch folded on the summary's prose", out, err)
	}
}
