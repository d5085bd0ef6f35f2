package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
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
	inboxPrefix    string // "" = not checked
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

// InboxPrefix says which reply-inbox prefix the NATS connection must use.
// The shipped auth configs (nats/auth) let each user subscribe to replies
// only under its own prefix, _INBOX_<user>, so that no client reads
// another's JetStream acks, context replies or the processor's deliveries;
// a connection left on the default _INBOX would fail on its first publish
// or request with a permissions violation, or time out. The prefix is set
// when connecting:
//
//	nc, err := nats.Connect(url, nats.UserInfo("bot", pw), nats.CustomInboxPrefix("_INBOX_bot"))
//	pub, err := client.NewPublisher(js, client.InboxPrefix("_INBOX_bot"))
//
// and NewPublisher and NewBuilder refuse a connection opened with another
// prefix, naming the option to use.
func InboxPrefix(prefix string) Option {
	return func(c *config) error {
		if err := checkInboxPrefix(prefix); err != nil {
			return fmt.Errorf("foldstream client: InboxPrefix: %w", err)
		}
		c.inboxPrefix = prefix
		return nil
	}
}

// checkInboxPrefix accepts what nats.CustomInboxPrefix accepts and keeps
// every inbox under prefix.>: subject tokens without wildcards.
func checkInboxPrefix(prefix string) error {
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("expected subject tokens without wildcards, spaces or empty tokens, e.g. _INBOX_bot, got %q", prefix)
		}
	}
	return nil
}

// checkConn reports a connection whose inbox prefix is not the one the
// InboxPrefix option asks for.
func (c config) checkConn(nc *nats.Conn) error {
	if c.inboxPrefix == "" || nc == nil {
		return nil
	}
	if got := nc.Opts.InboxPrefix; got != c.inboxPrefix {
		if got == "" {
			got = strings.TrimSuffix(nats.InboxPrefix, ".")
		}
		return fmt.Errorf("foldstream client: InboxPrefix: the NATS connection's inbox prefix is %q, expected %q: connect with nats.CustomInboxPrefix(%q)", got, c.inboxPrefix, c.inboxPrefix)
	}
	return nil
}

// streamName derives a stream name from the prefix the way the processor
// does ("fold" → FOLD_IN, FOLD_OUT). It is repeated here rather than
// imported because the processor's package embeds a nats-server, which a
// bot should not have to link.
func streamName(prefix, suffix string) string {
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(prefix)) + "_" + suffix
}
