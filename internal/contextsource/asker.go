package contextsource

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// MaxAnswerChars bounds an answer's text, in characters: longer answers
// are clamped at a sentence boundary.
const MaxAnswerChars = 400

// Answer statuses.
const (
	StatusOK           = "ok"
	StatusTimeout      = "timeout"
	StatusNoResponders = "no_responders"
	StatusError        = "error"
)

// Answer is one source's contribution to a fold.
type Answer struct {
	Label string
	// Text is the source's answer, single-lined and clamped to
	// MaxAnswerChars; empty unless Status is ok (and possibly then: the
	// source had nothing to report).
	Text string
	// Status is ok, timeout, no_responders or error.
	Status string
	// Err says why Status is not ok.
	Err error
	// Timeout is how long the source was given (its own timeout, or less
	// when the caller's context ended first).
	Timeout time.Duration
	// Took is how long the source took to answer or fail.
	Took time.Duration
}

// Line is the answer's text, or for a source that did not answer a short
// note in parentheses that keeps the gap visible in the summary.
func (a Answer) Line() string {
	switch a.Status {
	case StatusOK:
		if a.Text == "" {
			return "(nothing to report)"
		}
		return a.Text
	case StatusTimeout:
		return "(no answer within " + shortDuration(a.Timeout) + ")"
	case StatusNoResponders:
		return "(source unavailable)"
	default:
		return "(source failed to answer)"
	}
}

// shortDuration rounds d for a note: "2s", "1.5s", "250ms".
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	default:
		return d.String()
	}
}

// Asker asks context sources over NATS request-reply. It is safe for
// concurrent use.
type Asker struct {
	nc  *nats.Conn
	log zerolog.Logger
}

// NewAsker returns an Asker on nc that logs to log.
func NewAsker(nc *nats.Conn, log zerolog.Logger) *Asker {
	return &Asker{nc: nc, log: log}
}

// Ask asks every source concurrently for a summary of [from, to] of
// session, each within its own timeout and never past ctx, and returns one
// Answer per source in the order of sources. It never fails: a source that
// does not answer gets an Answer with status timeout, no_responders or
// error.
func (a *Asker) Ask(ctx context.Context, session string, from, to time.Time, sources []Source) []Answer {
	if len(sources) == 0 {
		return nil
	}
	answers := make([]Answer, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		wg.Go(func() { answers[i] = a.askOne(ctx, session, from, to, src) })
	}
	wg.Wait()
	return answers
}

func (a *Asker) askOne(ctx context.Context, session string, from, to time.Time, src Source) Answer {
	started := time.Now()
	limit := src.EffectiveTimeout()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < limit {
		limit = max(time.Until(dl), 0)
	}
	ans := Answer{Label: src.Label, Timeout: limit}
	text, err := a.request(ctx, session, from, to, src)
	ans.Took = time.Since(started)
	log := a.log.With().Str("session", session).Str("source", src.Label).Str("subject", src.Subject).Logger()
	if err == nil {
		ans.Status, ans.Text = StatusOK, clean(text, MaxAnswerChars)
		log.Info().Str("event", "context_source_answered").Int("chars", len([]rune(ans.Text))).
			Int("original_chars", len([]rune(text))).Dur("took", ans.Took).Msg("context source answered")
		log.Debug().Str("event", "context_source_answer").Str("text", ans.Text).Msg("context source answer")
		return ans
	}
	ans.Err = err
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		ans.Status = StatusNoResponders
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		ans.Status = StatusTimeout
	default:
		ans.Status = StatusError
	}
	ev := log.Warn()
	if ans.Status == StatusError && errors.Is(err, context.Canceled) {
		ev = log.Debug() // the fold was abandoned: nothing wrong with the source
	}
	ev.Str("event", "context_source_failed").Str("status", ans.Status).Err(err).
		Dur("took", ans.Took).Dur("timeout", limit).Msg("context source did not answer")
	return ans
}

// request sends one request and returns the reply's text or why there is
// none.
func (a *Asker) request(ctx context.Context, session string, from, to time.Time, src Source) (string, error) {
	if a.nc == nil {
		return "", errors.New("no NATS connection")
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, src.EffectiveTimeout())
	defer cancel()
	data, err := json.Marshal(Request{V: Version, Session: session, From: from.UTC(), To: to.UTC(), Prompt: src.Prompt})
	if err != nil {
		return "", err
	}
	msg := nats.NewMsg(src.Subject)
	msg.Data = data
	reply, err := a.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return "", err
	}
	if desc := reply.Header.Get(micro.ErrorHeader); desc != "" || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		return "", &SourceError{Code: reply.Header.Get(micro.ErrorCodeHeader), Description: desc}
	}
	return decodeReply(reply.Data)
}

// clean makes text one line (singleLine) and clamps it to maxChars at a
// sentence boundary.
func clean(text string, maxChars int) string {
	return sentence.Clamp(singleLine(text), maxChars)
}

// singleLine makes text one line of printable characters: runs of white
// space and control characters (line and paragraph separators included)
// become one space; invalid UTF-8 becomes U+FFFD.
func singleLine(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range text {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
