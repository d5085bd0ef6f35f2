package tokens

import (
	"strings"
	"sync"
	"testing"
)

// Counts below were produced by running this package (tiktoken-go v0.10.0)
// and agree with OpenAI's tiktoken for the same encodings.
func TestCountBPE(t *testing.T) {
	tests := []struct {
		enc  string
		text string
		want int
	}{
		{Cl100kBase, "", 0},
		{Cl100kBase, " ", 1},
		{Cl100kBase, "hello world", 2},
		{Cl100kBase, "Hello, world!", 4},
		{Cl100kBase, "The quick brown fox jumps over the lazy dog.", 10},
		{Cl100kBase, "supercalifragilistic", 7},
		{Cl100kBase, "1234567890", 4},
		{Cl100kBase, "hello\n\nworld", 3},
		{Cl100kBase, "こんにちは世界", 4},
		{Cl100kBase, "🙂🙂", 4},
		// Special-token text in a transcript is plain text, not a control token.
		{Cl100kBase, "<|endoftext|>", 7},
		{O200kBase, "hello world", 2},
		{O200kBase, "The quick brown fox jumps over the lazy dog.", 10},
		{O200kBase, "supercalifragilistic", 6},
		{O200kBase, "こんにちは世界", 2},
		{O200kBase, "🙂🙂", 2},
	}
	counters := map[string]*Counter{}
	for _, tt := range tests {
		c := counters[tt.enc]
		if c == nil {
			var err error
			if c, err = New(tt.enc); err != nil {
				t.Fatal(err)
			}
			counters[tt.enc] = c
		}
		if got := c.Count(tt.text); got != tt.want {
			t.Errorf("%s Count(%q) = %d, want %d", tt.enc, tt.text, got, tt.want)
		}
	}
}

func TestHeuristic(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},           // 1/4*1.2 = 0.3 -> 1
		{"abcd", 2},        // 1.2 -> 2
		{"abcdefghij", 3},  // 3.0 exactly: no float drift to 4
		{"abcdefghijk", 4}, // 3.3 -> 4
		{"hello world", 4}, // 11 runes: 3.3 -> 4
		{strings.Repeat("x", 100), 30},
		{strings.Repeat("x", 101), 31}, // 30.3 -> 31
		{"こんにちは世界", 3},                 // 7 runes (21 bytes): 2.1 -> 3
		{"héllo", 2},                   // 5 runes, 6 bytes: 1.5 -> 2
		{"a\xffb", 1},                  // invalid byte counts as one rune
	}
	for _, tt := range tests {
		if got := Heuristic(tt.text); got != tt.want {
			t.Errorf("Heuristic(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestNewNames(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", Cl100kBase},
		{"cl100k_base", Cl100kBase},
		{" CL100K_BASE ", Cl100kBase},
		{"o200k_base", O200kBase},
		{"heuristic", HeuristicName},
		{"chars", HeuristicName},
	}
	for _, tt := range tests {
		c, err := New(tt.in)
		if err != nil {
			t.Fatalf("New(%q): %v", tt.in, err)
		}
		if got := c.Encoding(); got != tt.want {
			t.Errorf("New(%q).Encoding() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewUnknown(t *testing.T) {
	for _, name := range []string{"p50k_base", "gpt-4o", "cl100k"} {
		c, err := New(name)
		if err == nil {
			t.Fatalf("New(%q) = %v, want error", name, c)
		}
		msg := err.Error()
		for _, want := range []string{name, `"cl100k_base"`, `"o200k_base"`, `"heuristic"`, `"chars"`} {
			if !strings.Contains(msg, want) {
				t.Errorf("New(%q) error %q does not mention %s", name, msg, want)
			}
		}
	}
}

func TestHeuristicCounter(t *testing.T) {
	c, err := New("heuristic")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "hello world", "The quick brown fox jumps over the lazy dog."} {
		if got, want := c.Count(s), Heuristic(s); got != want {
			t.Errorf("heuristic Count(%q) = %d, want %d", s, got, want)
		}
	}
	var nilCounter *Counter
	if nilCounter.Encoding() != HeuristicName {
		t.Errorf("nil Counter Encoding = %q", nilCounter.Encoding())
	}
	if got := nilCounter.Count("hello world"); got != 4 {
		t.Errorf("nil Counter Count = %d, want heuristic 4", got)
	}
}

// Invalid UTF-8 makes the tokenizer fail (strict mode); Count must fall back
// to the heuristic instead of returning an error or a byte-level guess.
func TestInvalidUTF8FallsBack(t *testing.T) {
	c, err := New(Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	valid := "hello world hello world"
	if got := c.Count(valid); got != 4 {
		t.Fatalf("Count(%q) = %d, want 4", valid, got)
	}
	bad := valid + "\xff"
	if got, want := c.Count(bad), Heuristic(bad); got != want {
		t.Errorf("Count(invalid UTF-8) = %d, want heuristic %d", got, want)
	}
	if Heuristic(bad) == 4 {
		t.Fatal("test input does not tell BPE and heuristic apart")
	}
}

func TestConcurrentUse(t *testing.T) {
	texts := []string{
		"hello world",
		"The quick brown fox jumps over the lazy dog.",
		"こんにちは世界",
		"bad \xff byte",
		strings.Repeat("Alice: we should book the flight for Tuesday. ", 20),
	}
	for _, enc := range []string{Cl100kBase, O200kBase, HeuristicName} {
		c, err := New(enc)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int, len(texts))
		for i, s := range texts {
			want[i] = c.Count(s)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					k := (g + i) % len(texts)
					if got := c.Count(texts[k]); got != want[k] {
						select {
						case errs <- enc:
						default:
						}
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("%s: concurrent Count disagreed with sequential Count", e)
		}
	}
}

// turn200 is a typical transcript turn of about 200 characters.
const turn200 = "Alice: Okay, so I think we should move the product launch to Thursday, " +
	"because the vendor still hasn't confirmed the shipment. Can you ask Bob " +
	"whether the warehouse can hold the pallets until then?"

func BenchmarkCount(b *testing.B) {
	for _, enc := range []string{Cl100kBase, O200kBase, HeuristicName} {
		c, err := New(enc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(enc, func(b *testing.B) {
			b.SetBytes(int64(len(turn200)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n += c.Count(turn200)
			}
			_ = n
		})
	}
}

func TestLazy(t *testing.T) {
	c, err := New(Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	text := "The quick brown fox jumps over the lazy dog."
	l := c.Lazy(text)
	if got, want := l.Estimate(), Heuristic(text); got != want {
		t.Errorf("Estimate before Tokens = %d, want heuristic %d", got, want)
	}
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.Estimate()
			got[i] = l.Tokens()
		}()
	}
	wg.Wait()
	for i, n := range got {
		if n != 10 {
			t.Errorf("goroutine %d: Tokens = %d, want 10", i, n)
		}
	}
	if e := l.Estimate(); e != 10 {
		t.Errorf("Estimate after Tokens = %d, want exact 10", e)
	}
	var zero Lazy
	if zero.Tokens() != 0 || zero.Estimate() != 0 {
		t.Error("zero Lazy should count 0")
	}
}
