package fold

import (
	"math/rand/v2"
	"testing"
)

// transcript is a session's turns as letters: u user, a assistant text,
// c assistant tool call, r tool result.
func transcript(s string) []Turn {
	turns := make([]Turn, len(s))
	for i, ch := range s {
		t := Turn{Index: int64(i), Role: "user", Text: "x"}
		switch ch {
		case 'a':
			t.Role = "assistant"
		case 'c':
			t.Role, t.Kind, t.Tool = "assistant", "tool_call", "grep"
		case 'r':
			t.Role, t.Kind, t.Tool = "tool", "tool_result", "grep"
		}
		turns[i] = t
	}
	return turns
}

// marks is the Joined input of a check at cursor over the whole transcript.
func marks(turns []Turn, cursor int64) func(int) bool {
	j := joinedTurns(turns)
	return func(i int) bool { return j[cursor+int64(i)] }
}

func TestToolExchangeMarks(t *testing.T) {
	tests := []struct{ turns, want string }{
		{"uauaua", "......"},
		{"ucrau", "..j.."},   // a call and its result
		{"uccrru", "..jjj."}, // parallel calls and their results
		{"ucarau", "..jj.."}, // the assistant talks between call and result
		{"ucuau", "....."},   // a user turn ends an unanswered exchange
		{"urau", ".j.."},     // a result without its call stays with what precedes it
		{"crcrcr", ".j.j.j"}, // an agent loop: a boundary fits between exchanges
	}
	for _, tt := range tests {
		got := ""
		for _, j := range joinedTurns(transcript(tt.turns)) {
			if j {
				got += "j"
			} else {
				got += "."
			}
		}
		if got != tt.want {
			t.Errorf("%s: joined %s, want %s", tt.turns, got, tt.want)
		}
	}
}

// A bot that sends calls and never their results cannot stop folding: a
// run of joined turns ends after MaxJoinedRun.
func TestToolExchangeRunIsBounded(t *testing.T) {
	var x ToolExchange
	x.Next("assistant", "tool_call")
	run := 0
	for i := range 3 * MaxJoinedRun {
		if x.Next("assistant", "") {
			run++
			if run > MaxJoinedRun {
				t.Fatalf("turn %d: %d joined turns in a row", i, run)
			}
		} else {
			run = 0
		}
	}
}

// With recent 4 / batch 4 the boundary would fall between a tool call and
// its result, leaving the verbatim part to start with an orphan result.
func TestPlanNeverSplitsAToolExchange(t *testing.T) {
	p := DefaultPolicy()
	p.Window.Recent, p.Window.Batch = 4, 4
	p.Tokens = TokenPolicy{
		ContextWindow: 10000, ReserveTokens: 1000, EmergencyThreshold: 0.8,
		KeepRecentTokens: 2000, KeepRecentMessages: 4, ChunkFraction: 0.25, OversizedFraction: 0.5,
	}
	p.Evict = EvictPolicy{TargetUtilization: 0.7, MinKeepMessages: 10}
	p.Interval = IntervalPolicy{Exchanges: 2, KeepRecent: 3}
	with := func(m Mode) Policy { q := p; q.Mode = m; return q }
	pad := func(s string, n int) string {
		for len(s) < n {
			s = "u" + s
		}
		return s
	}

	tests := []struct {
		name     string
		p        Policy
		turns    string
		c        Check
		from, to int64
		reason   SkipReason
	}{
		// 9 turns: the window folds [0, 4); turn 4 answers turn 3's call.
		{name: "window grows the batch over the result", p: with(ModeWindow), turns: "uuucrauuu", to: 5},
		{name: "window without tool traffic folds the batch", p: with(ModeWindow), turns: "uuuuuuuuu", to: 4},
		// Results at 4 and 5 reach the recent window (5): keep the exchange verbatim.
		{name: "window shrinks before parallel calls", p: with(ModeWindow), turns: "uuccrruuu", to: 2},
		{name: "window waits when the exchange is the whole batch", p: with(ModeWindow), turns: "ccccrrrru", reason: SkipNoEligibleBatch},
		{name: "window after a fold", p: with(ModeWindow), turns: "uuuuuuucruuuu", c: Check{Cursor: 4}, from: 4, to: 9},
		// 100 × 100 tokens over the emergency fraction: keep 20, fold [0, 80).
		{name: "tokens keeps the exchange verbatim", p: with(ModeTokens), turns: pad("cr", 81) + pad("", 19),
			c: Check{UnfoldedTokens: 10000, TurnTokens: uniform(100)}, to: 79},
		{name: "tokens without tool traffic", p: with(ModeTokens), turns: pad("", 100),
			c: Check{UnfoldedTokens: 10000, TurnTokens: uniform(100)}, to: 80},
		// 10 turns, 2 exchanges, keep 3: fold [0, 7).
		{name: "interval keeps the exchange verbatim", p: with(ModeInterval), turns: "uauauucrau", c: Check{Exchanges: 2}, to: 6},
		{name: "interval keeps parallel calls verbatim", p: with(ModeInterval), turns: "uauauccrru", c: Check{Exchanges: 2}, to: 5},
		// 91 × 100 tokens over 9000, down to 7000: evict [0, 21).
		{name: "evict keeps the exchange", p: with(ModeEvict), turns: pad("cr", 22) + pad("", 69),
			c: Check{UnfoldedTokens: 9100, TurnTokens: uniform(100)}, to: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turns := transcript(tt.turns)
			c := tt.c
			c.Total = int64(len(turns))
			c.Joined = marks(turns, c.Cursor)
			d := tt.p.Plan(c)
			if tt.reason != NoSkip {
				if d.Fold || d.Reason != tt.reason {
					t.Fatalf("fold %v [%d, %d) reason %q, want a skip %q", d.Fold, d.From, d.To, d.Reason, tt.reason)
				}
				return
			}
			if !d.Fold || d.From != c.Cursor || d.To != tt.to {
				t.Fatalf("fold %v [%d, %d) reason %q, want [%d, %d)", d.Fold, d.From, d.To, d.Reason, c.Cursor, tt.to)
			}
			if k := turns[d.To]; k.Kind == "tool_result" {
				t.Fatalf("the verbatim part starts with a tool result (turn %d)", d.To)
			}
		})
	}
}

// Whatever the transcript and the mode, no planned fold ends inside a tool
// exchange, and a session keeps folding: every check that would have folded
// without tool traffic folds eventually.
func TestPlanToolPairsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 8))
	p := DefaultPolicy()
	p.Window.Recent, p.Window.Batch = 4, 4
	p.Tokens = TokenPolicy{ContextWindow: 2000, ReserveTokens: 200, EmergencyThreshold: 0.8,
		KeepRecentTokens: 300, KeepRecentMessages: 3, ChunkFraction: 0.25, OversizedFraction: 0.5}
	p.Evict = EvictPolicy{TargetUtilization: 0.6, MinKeepMessages: 3}
	p.Interval = IntervalPolicy{Exchanges: 2, KeepRecent: 3}
	for _, mode := range []Mode{ModeWindow, ModeTokens, ModeInterval, ModeEvict} {
		q := p
		q.Mode = mode
		for range 200 {
			letters := make([]byte, 60+r.IntN(60))
			for i := range letters {
				letters[i] = "uacrcr"[r.IntN(6)]
			}
			turns := transcript(string(letters))
			joined := joinedTurns(turns)
			var cursor int64
			folds := 0
			for total := int64(1); total <= int64(len(turns)); total++ {
				c := Check{Cursor: cursor, Total: total, TurnTokens: uniform(100), Exchanges: 2,
					UnfoldedTokens: int(total-cursor) * 100}
				c.Joined = marks(turns, cursor)
				d := q.Plan(c)
				if !d.Fold {
					continue
				}
				if d.To < total && joined[d.To] {
					t.Fatalf("%s %s: fold [%d, %d) of %d ends inside a tool exchange", mode, letters, d.From, d.To, total)
				}
				cursor, folds = d.To, folds+1
			}
			if folds == 0 {
				t.Fatalf("%s %s: no fold in %d turns", mode, letters, len(turns))
			}
		}
	}
}

func TestChunksKeepToolExchangesWhole(t *testing.T) {
	turns := transcript("uuucrrauuuuu")
	for i := range turns {
		turns[i].Tokens = 10
	}
	// 40 tokens a chunk would cut at turn 4, between the call and its results.
	chunks := splitChunks(turns, ChunkOptions{ChunkTokens: 40, OversizedTokens: 100})
	start := 0
	for _, c := range chunks {
		if start > 0 && (turns[start].Kind == "tool_result") {
			t.Fatalf("a chunk starts with a tool result at turn %d", start)
		}
		start += len(c.turns)
	}
	if n := len(chunks[0].turns); n != 6 {
		t.Fatalf("first chunk has %d turns, want 6 (the exchange whole)", n)
	}
	// Never at the price of an oversized (skipped) chunk.
	chunks = splitChunks(turns, ChunkOptions{ChunkTokens: 40, OversizedTokens: 50})
	for _, c := range chunks {
		if c.tokens > 50 {
			t.Fatalf("chunk of %d tokens above the oversized limit", c.tokens)
		}
	}
}
