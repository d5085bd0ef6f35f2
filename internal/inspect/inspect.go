// Package inspect is foldstream's session inspector: a read-only web page,
// served from files embedded in the binary (no CDN, no build step), that
// shows an operator what happened to one session and why. Its data comes
// from the same places the processor and its builders use, over one NATS
// connection:
//
//   - the session list: checkpoint keys of the KV bucket, each checkpoint,
//     and the inbound stream for the lag behind it;
//   - a session's timeline: internal/replay's merge of the inbound,
//     outbound and dead-letter streams, with a word diff of each summary
//     version against the previous one (cached per session, paged);
//   - the packed context: the context service's request, as a builder
//     sends it (<prefix>.svc.context);
//   - what-if refold: the session's inbound events replayed into a scratch
//     in-memory nats-server and processor with other settings (whatif.go);
//   - live updates: server-sent events fed by a subscription on the
//     session's subjects (live.go).
//
// It never publishes to the live streams, never writes the KV bucket and
// never serves a request that changes anything: every route is GET except
// the what-if refold, a POST whose writes stay in its scratch server.
package inspect

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

//go:embed static
var staticFiles embed.FS

// Text policies: who sees transcript text (turns, notes, summaries,
// memories, contexts, rejected payloads).
const (
	// TextAllow shows text to everyone who can reach the page (the
	// default: it listens on loopback, so that is whoever is on the host).
	TextAllow = "allow"
	// TextDeny never shows text: structure, counts and lengths only.
	TextDeny = "deny"
	// TextHeader shows text only to requests that carry the header named
	// by Config.TextHeader with the value "allow". The deployment's
	// authenticating reverse proxy sets it for users allowed to read
	// transcripts and strips it from everyone else's requests.
	TextHeader = "header"
)

// DefaultTextHeader is the header a reverse proxy sets under TextHeader.
const DefaultTextHeader = "X-Foldstream-Transcripts"

// Config is what the inspector is given; it creates no connection itself.
type Config struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Layout broker.Layout
	// KV is the session checkpoint bucket (opened, never created).
	KV jetstream.KeyValue
	// Text is TextAllow, TextDeny or TextHeader; TextHeaderName names the
	// header for TextHeader (default DefaultTextHeader).
	Text           string
	TextHeaderName string
	// AllowedHosts, when set, are the only Host header values served (a
	// page on loopback must not answer a DNS-rebound name).
	AllowedHosts []string
	// WhatIf is the base of what-if refolds: the processor's own settings,
	// which a refold's form overrides field by field.
	WhatIf WhatIfConfig
	Log    zerolog.Logger
	// Now is the clock (lag, lease state); nil is time.Now.
	Now func() time.Time
}

// WhatIfConfig is what a what-if refold starts from.
type WhatIfConfig struct {
	// Base is the processor's configuration.
	Base processor.Config
	// Summarizers are the summarizers a refold may use, by name; "offline"
	// should always be there. The processor's configured one (e.g.
	// "openai") may be added: a refold then calls the same model.
	Summarizers map[string]func() (fold.Summarizer, error)
	Tokens      processor.TokenCounter
	// Timeout bounds one refold (default 2 minutes).
	Timeout time.Duration
}

// Server serves the inspector.
type Server struct {
	cfg   Config
	subj  events.Subjects
	now   func() time.Time
	log   zerolog.Logger
	cache *timelineCache
	// whatIf allows one refold at a time: each runs a scratch server and
	// processor, CPU the live processor may need.
	whatIf chan struct{}
	// done ends the live streams (Close): an http.Server's Shutdown waits
	// for active requests, and a server-sent event stream never ends on
	// its own.
	done      chan struct{}
	closeOnce sync.Once
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.NC == nil || cfg.JS == nil || cfg.KV == nil {
		return nil, errors.New("inspect: NATS connection, JetStream and the session bucket are required")
	}
	switch cfg.Text {
	case "":
		cfg.Text = TextAllow
	case TextAllow, TextDeny, TextHeader:
	default:
		return nil, fmt.Errorf("inspect: text policy: expected allow, deny or header, got %q", cfg.Text)
	}
	if cfg.TextHeaderName == "" {
		cfg.TextHeaderName = DefaultTextHeader
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WhatIf.Timeout <= 0 {
		cfg.WhatIf.Timeout = 2 * time.Minute
	}
	s := &Server{cfg: cfg, subj: cfg.Layout.Subjects, now: cfg.Now, log: cfg.Log, whatIf: make(chan struct{}, 1), done: make(chan struct{})}
	s.cache = newTimelineCache(cfg.JS, cfg.Layout, 8)
	return s, nil
}

// Close ends the live update streams so that the HTTP server serving them
// can shut down; other requests finish normally.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// Handler returns the inspector's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFiles, "static")
	files := http.FileServerFS(static)
	mux.Handle("GET /", files)
	mux.HandleFunc("GET /api/config", s.handleConfig)
	mux.HandleFunc("GET /api/sessions", s.handleSessions)
	mux.HandleFunc("GET /api/sessions/{id}", s.handleSession)
	mux.HandleFunc("GET /api/sessions/{id}/timeline", s.handleTimeline)
	mux.HandleFunc("GET /api/sessions/{id}/context", s.handleContext)
	mux.HandleFunc("POST /api/sessions/{id}/whatif", s.handleWhatIf)
	mux.HandleFunc("GET /api/sessions/{id}/live", s.handleLive)
	return s.guard(mux)
}

// guard applies what every response needs: the Host check, and headers
// that keep the page from being framed or fed foreign scripts.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.AllowedHosts) > 0 && !hostAllowed(r.Host, s.cfg.AllowedHosts) {
			http.Error(w, fmt.Sprintf("host %q: expected one of %s (--ui-allowed-hosts)", r.Host, strings.Join(s.cfg.AllowedHosts, ", ")), http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func hostAllowed(host string, allowed []string) bool {
	for _, a := range allowed {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}

// LoopbackHosts are the Host values a page served on the loopback address
// addr answers to.
func LoopbackHosts(addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := strconv.Itoa(tcp.Port)
	return []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port}
}

// textAllowed reports whether r may see transcript text.
func (s *Server) textAllowed(r *http.Request) bool {
	switch s.cfg.Text {
	case TextAllow:
		return true
	case TextHeader:
		return strings.EqualFold(r.Header.Get(s.cfg.TextHeaderName), "allow")
	default:
		return false
	}
}

func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	names := make([]string, 0, len(s.cfg.WhatIf.Summarizers))
	for n := range s.cfg.WhatIf.Summarizers {
		names = append(names, n)
	}
	b := s.cfg.WhatIf.Base
	writeJSON(w, http.StatusOK, map[string]any{
		"prefix": s.subj.Prefix, "text": s.textAllowed(r), "summarizers": names, "modes": fold.ModeNames(),
		"defaults": map[string]any{
			"mode": string(b.Mode), "recent_window": b.Window.Recent, "batch_size": b.Window.Batch,
			"max_summary_chars": b.Window.MaxSummaryChars,
		},
	})
}

// sessionParam reads and checks the {id} path value.
func sessionParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := events.CheckSession("session", id); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return id, true
}

// intParam reads a non-negative integer query parameter.
func intParam(r *http.Request, name string, def, maxV int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (maxV > 0 && n > maxV) {
		if maxV > 0 {
			return 0, fmt.Errorf("query parameter %q: expected an integer from 0 to %d, got %q", name, maxV, v)
		}
		return 0, fmt.Errorf("query parameter %q: expected a non-negative integer, got %q", name, v)
	}
	return n, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the page inserts text with textContent, never as HTML
	_ = enc.Encode(v)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// request asks a foldstream service endpoint exactly as a builder does
// (client.Builder's request): JSON in, JSON or a micro error out.
func request(ctx context.Context, nc *nats.Conn, prefix, endpoint string, req, out any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	subject := client.ServiceSubject(prefix, endpoint)
	reply, err := nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("no foldstream service is listening on %s (is a processor running with --service?): %w", subject, err)
		}
		return fmt.Errorf("%s request on %s: %w", endpoint, subject, err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &client.ServiceError{Code: code, Description: reply.Header.Get(micro.ErrorHeader)}
	}
	if err := json.Unmarshal(reply.Data, out); err != nil {
		return fmt.Errorf("decode %s reply: %w", endpoint, err)
	}
	return nil
}

// serviceStatus maps a service error to an HTTP status.
func serviceStatus(err error) int {
	var se *client.ServiceError
	if errors.As(err, &se) {
		switch se.Code {
		case client.ErrCodeBadRequest:
			return http.StatusBadRequest
		case client.ErrCodeUnknownSession:
			return http.StatusNotFound
		}
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}
