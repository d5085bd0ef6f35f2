// Package tokens counts tokens in transcript text.
//
// foldstream uses a fallback chain:
//
//  1. provider-reported usage, when the bot sends it (the turn's
//     context_tokens / tokens fields): callers use those numbers as they are
//     and never ask this package;
//  2. otherwise a real offline BPE tokenizer
//     (github.com/tiktoken-go/tokenizer, whose vocabularies are compiled into
//     the binary as Go maps, so it needs no network and no files at run
//     time): cl100k_base by default, o200k_base selectable;
//  3. otherwise the heuristic chars/4 × 1.2, rounded up ([Heuristic]).
//
// The third step is also used, per call, whenever the tokenizer fails on an
// input (invalid UTF-8, an internal error or a panic): [Counter.Count] never
// returns an error.
package tokens

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"
)

// Encoding names accepted by [New].
const (
	// Cl100kBase is the BPE used by GPT-4 and GPT-3.5; the default.
	Cl100kBase = "cl100k_base"
	// O200kBase is the BPE used by GPT-4o, GPT-4.1, o1/o3/o4 and GPT-5.
	O200kBase = "o200k_base"
	// HeuristicName forces the chars/4 × 1.2 fallback (no BPE).
	HeuristicName = "heuristic"
	// charsAlias is accepted by New as another name for HeuristicName.
	charsAlias = "chars"
)

// Default is the encoding used when New is given an empty name.
const Default = Cl100kBase

// accepted lists the names New understands, for error messages.
var accepted = []string{Cl100kBase, O200kBase, HeuristicName, charsAlias}

// Counter counts tokens with one encoding. A Counter is immutable after New
// and safe for concurrent use by any number of goroutines.
type Counter struct {
	encoding string
	bpe      *codec.Codec // nil: heuristic only
}

// New returns a Counter for encoding: "cl100k_base" (also the choice for an
// empty string), "o200k_base", or "heuristic" / "chars" to force the
// chars/4 × 1.2 fallback. Any other name is an error that lists the accepted
// values.
//
// The first New for a BPE encoding builds its vocabulary table (about
// 100k entries for cl100k_base, 200k for o200k_base; tens of milliseconds),
// so create one Counter at start-up and share it.
func New(encoding string) (*Counter, error) {
	name := strings.ToLower(strings.TrimSpace(encoding))
	switch name {
	case "":
		name = Default
		fallthrough
	case Cl100kBase, O200kBase:
		// The codec package is used directly rather than tokenizer.Get so
		// that only these two vocabularies are linked into the binary
		// (tokenizer.Get references all of them: ~2.5 MB more).
		var bpe *codec.Codec
		if name == Cl100kBase {
			bpe = codec.NewCl100kBase()
		} else {
			bpe = codec.NewO200kBase()
		}
		// Strict: invalid UTF-8 makes Count return an error, and Count falls
		// back to the heuristic for that input instead of guessing on bytes.
		bpe.SetErrorMode(codec.ErrorModeStrict)
		return &Counter{encoding: name, bpe: bpe}, nil
	case HeuristicName, charsAlias:
		return &Counter{encoding: HeuristicName}, nil
	default:
		return nil, fmt.Errorf("tokens: unknown encoding %q: accepted values are %s",
			encoding, strings.Join(quoteAll(accepted), ", "))
	}
}

// Encoding reports the encoding in use: "cl100k_base", "o200k_base" or
// "heuristic" (also for a nil Counter, which counts with the heuristic).
func (c *Counter) Encoding() string {
	if c == nil {
		return HeuristicName
	}
	return c.encoding
}

// Count returns the number of tokens in text. It uses the BPE tokenizer when
// the Counter has one and falls back to [Heuristic] if the tokenizer fails on
// this input. A nil Counter counts with the heuristic.
func (c *Counter) Count(text string) int {
	if text == "" {
		return 0
	}
	if c == nil || c.bpe == nil {
		return Heuristic(text)
	}
	n, ok := c.countBPE(text)
	if !ok {
		return Heuristic(text)
	}
	return n
}

// countBPE runs the tokenizer, turning an error or a panic into ok == false.
func (c *Counter) countBPE(text string) (n int, ok bool) {
	defer func() {
		if recover() != nil {
			n, ok = 0, false
		}
	}()
	n, err := c.bpe.Count(text)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Lazy is a token count that is computed on first use and then remembered.
//
// A BPE count of a 200-character turn costs tens of microseconds and a few
// hundred allocations (the heuristic a fraction of a microsecond and none;
// BenchmarkCount), which would keep a core below the JetStream consume rate
// if every turn were counted on ingest. Modes that need a turn's tokens only
// at fold time (window, interval) can hold a Lazy per turn and pay for the
// BPE only for the turns they fold; modes whose trigger is token-based pay on
// first use. Estimate gives the heuristic without forcing the count.
//
// A Lazy is safe for concurrent use; its zero value counts zero tokens.
type Lazy struct {
	once sync.Once
	done atomic.Bool // set after n is written
	c    *Counter
	text string // shares the caller's bytes: strings are immutable
	n    int
}

// Lazy returns a count of text's tokens that is computed on the first call
// to [Lazy.Tokens].
func (c *Counter) Lazy(text string) *Lazy {
	return &Lazy{c: c, text: text}
}

// Tokens returns the token count, computing it with the Counter on the first
// call.
func (l *Lazy) Tokens() int {
	l.once.Do(func() {
		l.n = l.c.Count(l.text)
		l.done.Store(true)
	})
	return l.n
}

// Estimate returns the exact count if it has been computed already, else the
// heuristic count of the text. It never runs the BPE.
func (l *Lazy) Estimate() int {
	if l.done.Load() {
		return l.n
	}
	return Heuristic(l.text)
}

// Heuristic estimates the tokens in text as chars/4 × 1.2, rounded up, where
// chars is the number of runes (so non-ASCII text is not over-counted by its
// byte length; invalid bytes count one each). The arithmetic is exact
// integer math: ceil(runes × 3 / 10).
func Heuristic(text string) int {
	runes := utf8.RuneCountInString(text)
	return (runes*3 + 9) / 10
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
