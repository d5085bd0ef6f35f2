package broker

import (
	"fmt"
	"strings"
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
	opts := []nats.Option{
		nats.Name(cfg.Name),
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
	return nc, nil
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
