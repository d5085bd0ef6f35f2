package retry

import (
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// BreakerState is where a Breaker stands; the values are those of the
// foldstream_summarizer_breaker_state gauge.
type BreakerState int

// Breaker states.
const (
	BreakerClosed   BreakerState = iota // calls go through
	BreakerOpen                         // calls are refused until the next probe
	BreakerHalfOpen                     // one probe call may go through (or is in flight)
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "closed"
}

// BreakerConfig configures a Breaker.
type BreakerConfig struct {
	// Endpoint names the summarizer in logs and health reasons.
	Endpoint string
	// OpenFor is the wait before the first probe after the breaker opens
	// (default 1m); each failed probe doubles it, up to MaxOpenFor
	// (default 30m).
	OpenFor, MaxOpenFor time.Duration
	// BadRequests is how many bad_request failures in a row, with no call
	// answered in between, open the breaker (default 3). One session's
	// content can cause a 400, so a single one only backs that session
	// off; a run of them across the deployment is a broken request shape.
	BadRequests int
	// ProbeTimeout releases a probe whose outcome never came (default 5m),
	// so that a lost probe cannot keep the breaker half-open for good.
	ProbeTimeout time.Duration
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.OpenFor <= 0 {
		c.OpenFor = time.Minute
	}
	if c.MaxOpenFor < c.OpenFor {
		c.MaxOpenFor = max(30*time.Minute, c.OpenFor)
	}
	if c.BadRequests <= 0 {
		c.BadRequests = 3
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = 5 * time.Minute
	}
	return c
}

// Breaker stops model calls to an endpoint that answers every request with
// an error no retry can fix: a wrong API key (auth), a model that does not
// exist (not_found), or a run of bad requests. Retryable classes (timeouts,
// 429, 5xx) are left to the per-session backoff: they do not open it.
//
// While open, calls are refused; after OpenFor one probe call may go
// through (half-open): an answer closes the breaker, another failure of a
// breaker class opens it again for twice as long. Probe lets the next call
// through at once (a compact control asks for it). The breaker logs once
// per state change, at error level when it opens. It is safe for
// concurrent use; the caller passes the time.
type Breaker struct {
	cfg BreakerConfig
	log zerolog.Logger

	mu         sync.Mutex
	state      BreakerState
	cause      *Error    // the failure that opened it
	since      time.Time // when it opened
	probeAt    time.Time // open: when the next probe may start
	probeUntil time.Time // half-open with a probe in flight: when it counts as lost
	probing    bool
	openFor    time.Duration
	badRun     int
	opens      uint64
}

// NewBreaker returns a closed breaker.
func NewBreaker(cfg BreakerConfig, log zerolog.Logger) *Breaker {
	cfg = cfg.withDefaults()
	return &Breaker{cfg: cfg, log: log, openFor: cfg.OpenFor}
}

// Persistent reports whether errors of class c repeat until someone changes
// the deployment or the request (auth, bad_request, not_found), unlike
// other non-retryable classes such as invalid_output, where the next answer
// may differ: a fold failing so waits the longest backoff at once.
func Persistent(c Class) bool { return c == Auth || c == BadRequest || c == NotFound }

// endpointClass reports whether a failure of class c opens the breaker at
// once: the endpoint refuses the deployment, whatever the request.
func endpointClass(c Class) bool { return c == Auth || c == NotFound }

// Begin asks to start a model call at now. ok is false while the breaker
// refuses calls, with retryAt when asking again makes sense. probe is true
// when this call is the half-open probe: its caller must report it with
// Record, or with Release if the call never happened. force (a compact
// control) turns an open breaker half-open at once.
func (b *Breaker) Begin(now time.Time, force bool) (ok, probe bool, retryAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerClosed {
		return true, false, time.Time{}
	}
	if b.probing && now.After(b.probeUntil) {
		b.probing = false // its outcome never came
	}
	if b.state == BreakerOpen && (force || !now.Before(b.probeAt)) {
		b.state = BreakerHalfOpen
		reason := "probe due"
		if force {
			reason = "compact requested"
		}
		b.log.Info().Str("event", "summarizer_probe").Str("endpoint", b.cfg.Endpoint).Str("reason", reason).
			Msg("summarizer breaker half-open: one call probes the endpoint")
	}
	if b.state == BreakerHalfOpen && !b.probing {
		b.probing, b.probeUntil = true, now.Add(b.cfg.ProbeTimeout)
		return true, true, time.Time{}
	}
	if b.state == BreakerOpen {
		return false, false, b.probeAt
	}
	return false, false, b.probeUntil // a probe is in flight
}

// Release gives back a probe whose call never happened (the fold ended
// before it reached the model): the next Begin probes instead.
func (b *Breaker) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// Record reports the outcome of a model call; probe says whether it was
// the half-open probe (Begin's answer). nil, or an error that shows the
// endpoint accepts the deployment's requests (context_length,
// invalid_output), closes the breaker; auth and not_found open it; a run of
// bad_request opens it; other errors leave it as it is (a probe that fails
// so is given back). Canceled calls count for nothing. While half-open
// only the probe's failure opens it again: calls started before it opened
// report late.
func (b *Breaker) Record(now time.Time, err error, probe bool) {
	var e *Error
	if err != nil {
		e = Classify(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch {
	case e == nil || e.Class == ContextLength || e.Class == InvalidOutput:
		b.badRun = 0
		if b.state != BreakerClosed {
			b.log.Info().Str("event", "summarizer_available").Str("endpoint", b.cfg.Endpoint).
				Dur("unavailable_for", now.Sub(b.since)).Msg("summarizer answers again; breaker closed, folds resume")
			b.state, b.cause, b.openFor = BreakerClosed, nil, b.cfg.OpenFor
		}
	case e.Class == Canceled:
	case endpointClass(e.Class) || e.Class == BadRequest && b.badRun+1 >= b.cfg.BadRequests:
		b.badRun++
		b.open(now, e, probe)
	case e.Class == BadRequest:
		b.badRun++
	}
}

// open (re)opens the breaker after e; b.mu is held.
func (b *Breaker) open(now time.Time, e *Error, probe bool) {
	switch b.state {
	case BreakerClosed:
		b.since, b.openFor = now, b.cfg.OpenFor
	case BreakerOpen:
		return // further failures of calls started before it opened
	case BreakerHalfOpen:
		if !probe {
			return
		}
		b.openFor = min(2*b.openFor, b.cfg.MaxOpenFor)
	}
	b.state, b.cause, b.probing = BreakerOpen, e, false
	b.probeAt = now.Add(b.openFor)
	b.opens++
	b.log.Error().Err(e).Str("event", "summarizer_unavailable").Str("endpoint", b.cfg.Endpoint).
		Str("error_class", string(e.Class)).Int("status", e.StatusCode).Time("next_probe", b.probeAt).
		Msg("summarizer refuses every request (fix the key, model or request settings); folds pause until a probe succeeds or a compact control asks")
}

// State is the breaker's state now.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Opens counts the times the breaker opened.
func (b *Breaker) Opens() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opens
}

// Health reports whether the endpoint is usable, and why not: the reason
// names the endpoint, the error class and status, since when, and when the
// next probe is due.
func (b *Breaker) Health() (ok bool, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerClosed {
		return true, ""
	}
	return false, fmt.Sprintf("summarizer %s unavailable since %s (breaker %s): %v; next probe at %s, or send a compact control",
		b.cfg.Endpoint, b.since.UTC().Format(time.RFC3339), b.state, b.cause, b.probeAt.UTC().Format(time.RFC3339))
}
