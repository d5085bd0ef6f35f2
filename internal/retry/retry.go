package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy bounds the retries of one logical call. Zero fields take the
// DefaultPolicy value, so Policy{MaxAttempts: 1} means "no retries".
type Policy struct {
	Initial     time.Duration // first backoff interval
	Max         time.Duration // cap on any single wait, Retry-After included
	MaxAttempts int           // total attempts, the first one included
	Multiplier  float64       // interval growth per retry
	Jitter      float64       // randomization factor in [0, 1]: wait ∈ interval·[1−J, 1+J]
}

// DefaultPolicy suits a summarizer call bounded by a fold lease: a few quick
// retries for blips, and room for a typical 429 Retry-After.
func DefaultPolicy() Policy {
	return Policy{
		Initial:     500 * time.Millisecond,
		Max:         30 * time.Second,
		MaxAttempts: 4,
		Multiplier:  2,
		Jitter:      0.2,
	}
}

// Validate reports nonsensical values (negative durations, jitter outside
// [0,1], multiplier below 1, Initial above Max). Zero values are fine.
func (p Policy) Validate() error {
	var errs []error
	if p.Initial < 0 {
		errs = append(errs, fmt.Errorf("retry: Initial must be >= 0, got %v", p.Initial))
	}
	if p.Max < 0 {
		errs = append(errs, fmt.Errorf("retry: Max must be >= 0, got %v", p.Max))
	}
	if p.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("retry: MaxAttempts must be >= 0, got %d", p.MaxAttempts))
	}
	if p.Multiplier != 0 && p.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("retry: Multiplier must be >= 1, got %v", p.Multiplier))
	}
	if p.Jitter < 0 || p.Jitter > 1 {
		errs = append(errs, fmt.Errorf("retry: Jitter must be in [0,1], got %v", p.Jitter))
	}
	if q := p.withDefaults(); q.Initial > q.Max {
		errs = append(errs, fmt.Errorf("retry: Initial (%v) must not exceed Max (%v)", q.Initial, q.Max))
	}
	return errors.Join(errs...)
}

func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	if p.Initial <= 0 {
		p.Initial = d.Initial
	}
	if p.Max <= 0 {
		p.Max = d.Max
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.Multiplier < 1 {
		p.Multiplier = d.Multiplier
	}
	if p.Jitter < 0 || p.Jitter > 1 {
		p.Jitter = d.Jitter
	}
	return p
}

// Do runs op until it succeeds, fails with a non-retryable class, runs out
// of attempts, or the next wait would outlive ctx. Each failure is
// classified with Classify; the last one is returned as a *Error.
//
// Waits grow exponentially with jitter (backoff/v4). A server Retry-After is
// a floor on the wait; if it exceeds p.Max or would pass the ctx deadline,
// Do gives up instead of retrying early against the server's instruction
// (the engine's next trigger will try again later).
//
// onRetry, if non-nil, is called before each wait with the error that
// caused it and the wait chosen.
func Do(ctx context.Context, p Policy, op func(ctx context.Context) error, onRetry func(*Error, time.Duration)) error {
	p = p.withDefaults()
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: p.Jitter,
		Multiplier:          p.Multiplier,
		MaxInterval:         p.Max,
		MaxElapsedTime:      0, // the ctx deadline bounds total time
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()

	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Classify(fmt.Errorf("retry: before attempt %d: %w", attempt, err))
		}
		err := op(ctx)
		if err == nil {
			return nil
		}
		e := Classify(err)
		if !e.Retryable || attempt >= p.MaxAttempts || ctx.Err() != nil {
			return e
		}

		wait := b.NextBackOff()
		if e.RetryAfter > wait {
			if e.RetryAfter > p.Max {
				return e
			}
			wait = e.RetryAfter
		}
		// Jitter may push the interval past MaxInterval; Max is a hard cap.
		wait = min(wait, p.Max)
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return e
		}

		if onRetry != nil {
			onRetry(e, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			c := Canceled
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				c = Timeout
			}
			return &Error{
				Class:      c,
				Retryable:  Retryable(c),
				StatusCode: e.StatusCode,
				Err:        fmt.Errorf("retry: wait interrupted: %w; last attempt: %w", ctx.Err(), e),
			}
		}
	}
}
