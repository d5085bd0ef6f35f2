package servicetest

import (
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/rs/zerolog"
)

// GatedLLM is the real go-openai summarizer against an in-process
// chat-completions server whose first call blocks until Release: a fold
// that stays in flight for as long as a test needs.
type GatedLLM struct {
	Summarizer fold.Summarizer
	Server     *openaitest.Server
	release    chan struct{}
	once       sync.Once
}

var msgNum = regexp.MustCompile(`message number (\d+)`)

// NewGatedLLM starts the server; every reply names the range of message
// numbers it folded ("… messages 000 to 009.").
func NewGatedLLM(t testing.TB, log zerolog.Logger) *GatedLLM {
	t.Helper()
	g := &GatedLLM{Server: openaitest.New(t), release: make(chan struct{})}
	g.Server.SetFunc(func(n int, req openaitest.Request) openaitest.Reply {
		if n == 0 {
			<-g.release
		}
		nums := msgNum.FindAllStringSubmatch(req.Content(), -1)
		if len(nums) == 0 {
			return openaitest.OK("Alice and Bob kept talking.")
		}
		return openaitest.OK(fmt.Sprintf("Alice and Bob discussed messages %s to %s.", nums[0][1], nums[len(nums)-1][1]))
	})
	t.Cleanup(g.Release) // never leave the server's handler blocked
	s, err := openai.New(openai.Config{BaseURL: g.Server.URL, APIKey: "k", Model: "fold-mini", Timeout: 30 * time.Second,
		Retry: retry.Policy{MaxAttempts: 1}}, log)
	if err != nil {
		t.Fatal(err)
	}
	g.Summarizer = s
	return g
}

// Release lets the first call answer. Idempotent.
func (g *GatedLLM) Release() { g.once.Do(func() { close(g.release) }) }

// Calls is the number of summarizer calls received so far.
func (g *GatedLLM) Calls() int { return g.Server.Calls() }
