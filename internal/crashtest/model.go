package crashtest

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
)

// Call is one chat-completions call the Model received, decoded.
type Call struct {
	N         int    // 0-based call number
	Session   string // from the turns (or, for a re-compaction, the previous summary)
	Recompact bool   // a budget re-compaction pass: no transcript
	// Indexes are the transcript indexes of the folded turns (the prompt's
	// "turns <first>–<last>" range, line by line) and Numbers the message
	// numbers written in their text. For a turn that was neither lost nor
	// applied twice before the fold, they are equal.
	Indexes []int64
	Numbers []int
	// Previous is the previous summary the call carried ("" on the first
	// fold), Limit the character budget the prompt stated (recompaction).
	Previous string
	Limit    int
	Delay    time.Duration // how long the answer is held back
	Request  openaitest.Request
}

// Model is a fake summarizer behind the real HTTP wire format
// (openaitest): it answers every fold with SummaryText, naming the message
// numbers of the turns it was asked to fold, after a random delay. It
// records every call, so tests can tell which batches were folded and how
// often. SetFault replaces answers (errors, hangs, odd output).
type Model struct {
	Srv *openaitest.Server
	URL string // base URL for the openai summarizer, ending in /v1

	mu       sync.Mutex
	rng      *rand.Rand
	maxDelay time.Duration
	calls    []Call
	onCall   func(Call)
	fault    func(Call) *openaitest.Reply
}

// NewModel starts a Model whose answers are delayed by up to maxDelay
// (drawn from a generator seeded with seed). It stops with tb's test.
func NewModel(tb testing.TB, seed uint64, maxDelay time.Duration) *Model {
	m := &Model{rng: rand.New(rand.NewPCG(seed, 0x6d6f64656c)), maxDelay: maxDelay}
	m.Srv = openaitest.New(tb)
	m.URL = m.Srv.URL
	m.Srv.SetFunc(m.reply)
	return m
}

// OnCall registers fn, called (on the HTTP handler's goroutine) for every
// call before it is answered.
func (m *Model) OnCall(fn func(Call)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onCall = fn
}

// SetFault makes fn decide every answer: a non-nil reply replaces the
// normal one. fn runs on the HTTP handler's goroutine.
func (m *Model) SetFault(fn func(Call) *openaitest.Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = fn
}

// Calls returns the calls received so far.
func (m *Model) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

// SessionCalls returns the fold calls (not re-compactions) for session.
func (m *Model) SessionCalls(session string) []Call {
	var out []Call
	for _, c := range m.Calls() {
		if c.Session == session && !c.Recompact {
			out = append(out, c)
		}
	}
	return out
}

var (
	rangeRe    = regexp.MustCompile(`turns (\d+)–(\d+), `)
	lineRe     = regexp.MustCompile(`(?m)^[^\n]*?message number (\d+) of ([A-Za-z0-9_-]+)`)
	previousRe = regexp.MustCompile(`(?s)<previous_summary>\n(.*?)\n</previous_summary>`)
	limitRe    = regexp.MustCompile(`the limit is (\d+)`)
	summaryRe  = regexp.MustCompile(`^([A-Za-z0-9_-]+) folded messages ((?:\d+ ?)+)\.`)
)

func userMessage(req openaitest.Request) string {
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			return msg.Content
		}
	}
	return ""
}

// Decode parses a recorded request the way Model does.
func Decode(n int, req openaitest.Request) Call {
	user := userMessage(req)
	c := Call{N: n, Request: req}
	if pm := previousRe.FindStringSubmatch(user); pm != nil {
		c.Previous = pm[1]
	}
	transcript := user
	if i := strings.Index(user, "<transcript>\n"); i >= 0 {
		transcript = user[i:]
		if j := strings.Index(transcript, "\n</transcript>"); j >= 0 {
			transcript = transcript[:j]
		}
	} else {
		c.Recompact = true
		transcript = ""
		if lm := limitRe.FindStringSubmatch(user); lm != nil {
			c.Limit, _ = strconv.Atoi(lm[1])
		}
		if s, _, ok := ParseSummary(c.Previous); ok {
			c.Session = s
		}
	}
	first := int64(-1 << 32) // no range: indexes that match no message number
	if !c.Recompact {
		// The range stated last before the transcript (not one quoted in
		// the previous summary).
		head := user[:strings.Index(user, "<transcript>\n")]
		if rm := rangeRe.FindAllStringSubmatch(head, -1); rm != nil {
			first, _ = strconv.ParseInt(rm[len(rm)-1][1], 10, 64)
		}
	}
	if i := strings.Index(transcript, "\n"); i >= 0 {
		transcript = transcript[i+1:] // the lines after "<transcript>"
	}
	for i, line := range strings.Split(transcript, "\n") {
		lm := lineRe.FindStringSubmatch(line)
		if lm == nil {
			continue
		}
		num, _ := strconv.Atoi(lm[1])
		c.Indexes = append(c.Indexes, first+int64(i))
		c.Numbers = append(c.Numbers, num)
		c.Session = lm[2]
	}
	return c
}

func (m *Model) reply(n int, req openaitest.Request) openaitest.Reply {
	c := Decode(n, req)
	m.mu.Lock()
	if m.maxDelay > 0 {
		c.Delay = time.Duration(m.rng.Int64N(int64(m.maxDelay) + 1))
	}
	m.calls = append(m.calls, c)
	onCall, fault := m.onCall, m.fault
	m.mu.Unlock()
	if onCall != nil {
		onCall(c)
	}
	if fault != nil {
		if r := fault(c); r != nil {
			return *r
		}
	}
	r := openaitest.OK(Answer(c))
	r.Delay = c.Delay
	return r
}

// Answer is the Model's normal answer to c: SummaryText of the folded
// numbers, or for a re-compaction the first sentence of the previous
// summary (which, for the Model's own summaries, is SummaryText).
func Answer(c Call) string {
	if c.Recompact {
		first, _, _ := strings.Cut(c.Previous, ". ")
		return strings.TrimSuffix(first, ".") + "."
	}
	if len(c.Numbers) == 0 {
		return "Alice and Bob kept talking."
	}
	return SummaryText(c.Session, c.Numbers)
}

// SummaryText is the summary the Model writes for a fold of numbers.
func SummaryText(session string, numbers []int) string {
	parts := make([]string, len(numbers))
	for i, n := range numbers {
		parts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("%s folded messages %s.", session, strings.Join(parts, " "))
}

// ParseSummary reads the session and message numbers back from a summary
// that starts with SummaryText (clamped or padded summaries keep it as
// their first sentence).
func ParseSummary(s string) (session string, numbers []int, ok bool) {
	mm := summaryRe.FindStringSubmatch(s)
	if mm == nil {
		return "", nil, false
	}
	for _, f := range strings.Fields(mm[2]) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return "", nil, false
		}
		numbers = append(numbers, n)
	}
	return mm[1], numbers, true
}
