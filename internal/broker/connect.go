package broker

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// ConnConfig says how to reach NATS. With an empty URL and a non-nil
// Embedded server, the connection is in-process.
type ConnConfig struct {
	URL       string
	Name      string
	User      string
	Password  string
	Token     string
	NKeySeed  string // path to an nkey seed file
	CredsFile string // path to a .creds file (JWT + seed)
	TLSCA     string
	TLSCert   string
	TLSKey    string
	// InboxPrefix replaces _INBOX as the prefix of the connection's reply
	// subjects (JetStream acks and fetches, KV reads, requests). With the
	// shipped auth configs a user may subscribe only under _INBOX_<user>,
	// so that no client reads another's replies. "" keeps _INBOX.
	InboxPrefix string
}

// CheckInboxPrefix reports an inbox prefix that nats.go would refuse, or
// that would let replies land outside prefix.>: one or more subject tokens,
// no wildcards, no empty token.
func CheckInboxPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("expected subject tokens without wildcards, spaces or empty tokens, e.g. _INBOX_processor, got %q", prefix)
		}
	}
	return nil
}

// Connect dials NATS (or the embedded server) and logs connection changes.
func Connect(cfg ConnConfig, embedded *server.Server, log zerolog.Logger) (*nats.Conn, error) {
	// probe is the inbox checkInbox subscribes to: its refusal is returned
	// as an error, not logged.
	var probe atomic.Value
	probe.Store("")
	opts := []nats.Option{
		nats.Name(cfg.Name),
		// A bcrypt password check on a loaded server can take longer than
		// nats.go's 2 s default.
		nats.Timeout(10 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // our own Close/Drain
			}
			log.Warn().Err(err).Str("event", "nats_disconnected").Msg("disconnected from NATS")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("event", "nats_reconnected").Str("url", nc.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if p := probe.Load().(string); p != "" && strings.Contains(err.Error(), p) {
				return
			}
			ev := log.Error().Err(err).Str("event", "nats_async_error")
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("NATS async error")
		}),
	}
	if err := CheckInboxPrefix(cfg.InboxPrefix); err != nil {
		return nil, fmt.Errorf("nats: --inbox-prefix: %w", err)
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.NKeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed %s: %w", cfg.NKeySeed, err)
		}
		opts = append(opts, o)
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if cfg.TLSCert == "" || cfg.TLSKey == "" {
			return nil, fmt.Errorf("nats TLS: --nats-tls-cert and --nats-tls-key must be given together")
		}
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	url := cfg.URL
	if url == "" {
		if embedded == nil {
			return nil, fmt.Errorf("nats: no URL and no embedded server")
		}
		opts = append(opts, nats.InProcessServer(embedded))
		url = embedded.ClientURL()
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact(url), err)
	}
	if err := checkInbox(nc, cfg, &probe); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// inboxCheckTimeout bounds the round trip that checkInbox waits for.
const inboxCheckTimeout = 10 * time.Second

// InboxDeniedError is a server's refusal to let the connection subscribe
// to its own reply inbox: every JetStream call, KV read and request would
// wait for a reply that can never arrive and time out.
type InboxDeniedError struct {
	Prefix string // the connection's inbox prefix ("_INBOX" by default)
	User   string // the --nats-user, "" when another login was used
	Err    error  // the server's permissions violation
}

func (e *InboxDeniedError) Error() string {
	want := "_INBOX_<user>"
	if e.User != "" {
		want = "_INBOX_" + e.User
	}
	return fmt.Sprintf("nats: the server does not let this client read its replies under %s.> (%v): connect with --inbox-prefix %s, "+
		"the only inbox the shipped auth configs (nats/auth) let a user read, _INBOX_<user> (nats/README.md, Private inboxes)",
		e.Prefix, e.Err, want)
}

func (e *InboxDeniedError) Unwrap() error { return e.Err }

// checkInbox subscribes to a fresh inbox of nc and waits for the server's
// answer to a ping sent after it: the server checks a subscription's
// permission before it answers the ping, so a refused inbox is known at
// once instead of as the timeout of the first request.
func checkInbox(nc *nats.Conn, cfg ConnConfig, probe *atomic.Value) error {
	inbox := nc.NewInbox()
	probe.Store(inbox)
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("nats: subscribe to the reply inbox %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.FlushTimeout(inboxCheckTimeout); err != nil {
		return fmt.Errorf("nats: no answer from the server within %s: %w", inboxCheckTimeout, err)
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), inbox) {
		prefix := nc.Opts.InboxPrefix
		if prefix == "" {
			prefix = strings.TrimSuffix(nats.InboxPrefix, ".")
		}
		return &InboxDeniedError{Prefix: prefix, User: cfg.User, Err: err}
	}
	return nil
}

func redact(url string) string {
	// nats.go only redacts on a live connection; keep user info out of logs.
	for i := 0; i+2 < len(url); i++ {
		if url[i:i+3] == "://" {
			rest := url[i+3:]
			for j := 0; j < len(rest); j++ {
				if rest[j] == '@' {
					return url[:i+3] + "***@" + rest[j+1:]
				}
				if rest[j] == '/' {
					break
				}
			}
		}
	}
	return url
}
