package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Option configures a Publisher or a Builder. Options that do not apply to
// one of them are ignored by it.
type Option func(*config) error

type config struct {
	subjects       events.Subjects
	maxPending     int
	ackTimeout     time.Duration
	onError        func(error)
	requestTimeout time.Duration
	limits         events.Limits
	now            func() time.Time
}

func newConfig(opts []Option) (config, error) {
	subj, _ := events.NewSubjects(events.DefaultPrefix)
	c := config{
		subjects:       subj,
		maxPending:     256,
		ackTimeout:     10 * time.Second,
		requestTimeout: 5 * time.Second,
		now:            time.Now,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

// Prefix sets the subject prefix (the processor's --prefix; default
// "fold").
func Prefix(prefix string) Option {
	return func(c *config) error {
		s, err := events.NewSubjects(prefix)
		if err != nil {
			return fmt.Errorf("foldstream client: %w", err)
		}
		c.subjects = s
		return nil
	}
}

// MaxPending bounds the asynchronous publishes waiting for their stream
// acknowledgement (default 256). PublishTurnAsync blocks while that many
// are outstanding: a bot that outruns the server slows down instead of
// buffering without limit.
func MaxPending(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("foldstream client: MaxPending: expected at least 1, got %d", n)
		}
		c.maxPending = n
		return nil
	}
}

// AckTimeout bounds how long an asynchronous publish may wait for its
// acknowledgement before it is reported as failed (default 10s).
func AckTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("foldstream client: AckTimeout: expected a positive duration, got %s", d)
		}
		c.ackTimeout = d
		return nil
	}
}

// OnError receives the errors nothing else can return: failed
// asynchronous publishes (a *PublishError) and undecodable summary updates
// seen by WatchSummaries. It runs on the client's own goroutine and must
// not block for long. Without it, a Publisher sends async failures to
// Errors().
func OnError(fn func(error)) Option {
	return func(c *config) error {
		c.onError = fn
		return nil
	}
}

// RequestTimeout bounds a service request whose context has no deadline
// (default 5s).
func RequestTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("foldstream client: RequestTimeout: expected a positive duration, got %s", d)
		}
		c.requestTimeout = d
		return nil
	}
}

// WithLimits sets the size limits used to validate events before they are
// sent; use the processor's if it was configured with non-default limits.
func WithLimits(l Limits) Option {
	return func(c *config) error {
		c.limits = l
		return nil
	}
}

// streamName derives a stream name from the prefix the way the processor
// does ("fold" → FOLD_IN, FOLD_OUT). It is repeated here rather than
// imported because the processor's package embeds a nats-server, which a
// bot should not have to link.
func streamName(prefix, suffix string) string {
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(prefix)) + "_" + suffix
}
