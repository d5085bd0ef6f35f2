// Package service is foldstream's request-reply service for prompt
// builders, built on NATS micro so that it is discoverable ($SRV.PING,
// $SRV.INFO, $SRV.STATS) and load-balanced across processor instances by
// its queue group. Endpoints, under <prefix>.svc:
//
//   - context: a session's packed context, its layers in prompt
//     order (summary, or in mode evict the eviction note, then verbatim turns from the cursor),
//     within an optional budget in characters and/or tokens; with a query,
//     question-aware: the summary, the matching memories and earlier
//     turns, then the verbatim turns (pack.go);
//   - session: a session's checkpointed state;
//   - recall: the turns of a session that best match a query, by default
//     those before the cursor (folded or evicted), see recall.go.
//
// Recall and question-aware contexts search each session's recall index,
// kept in memory within a byte budget and current with the inbound stream
// (index_cache.go).
//
// The service reads what the processor writes (the KV checkpoint, the
// inbound stream and the memories on the outbound stream) and writes
// nothing of it, so it can run in any process that can read those. The
// one thing it writes is its own: with an embeddings endpoint, the turns'
// vectors, in the KV bucket <BASE>_VECTORS (index_vectors.go).
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	tokencount "github.com/foldstream/foldstream/internal/tokens" // the parameter "tokens" is the counter
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Version is the service's API version (semver, as micro requires). It
// moves with the request and reply types in package client, not with the
// processor binary.
const Version = "1.0.0"

// TokenCounter counts the tokens of a prompt line (the processor's
// tokenizer); nil means a chars/4×1.2 estimate.
type TokenCounter interface{ Count(text string) int }

// requestTimeout bounds the KV and stream reads of one request.
const requestTimeout = 10 * time.Second

type server struct {
	js     jetstream.JetStream
	in     jetstream.Stream
	layout broker.Layout
	subj   events.Subjects
	store  *state.Store
	tokens TokenCounter
	log    zerolog.Logger
	now    func() time.Time
	// adm is the processor's acceptance rules: the tail and the recall
	// index apply only the events the processor applied.
	adm state.Admission

	outMu sync.Mutex
	out   jetstream.Stream // the outbound stream, once looked up

	an         *analyzer
	embedCfg   *EmbeddingsConfig
	vec        *vectors    // nil: BM25 only (no embeddings endpoint)
	index      *indexCache // nil: no index kept (indexBytes 0)
	indexBytes int64
	istore     *indexStore // nil: indexes not persisted (storeBytes 0)
	pack       *packer     // nil: indexes not persisted (storeBytes 0)
	storeBytes int64
	storeKind  jetstream.StorageType // the index store's (IndexStoreInMemory)
	// storeChunked: every stored index is written in chunks, none inline
	// (tests of the chunked entries).
	storeChunked bool
	reg          prometheus.Registerer
	// scanIdle, if set, replaces recallIdle in stream scans (SeedIndexes:
	// a pass over many sessions on a busy machine).
	scanIdle time.Duration
	// memoryFailures counts reads of memories that failed (memoriesOf).
	memoryFailures prometheus.Counter
	// termIDs keeps the value packing's term numbering maps (a map of a
	// few thousand terms each request) for the next request.
	termIDs sync.Pool
	// bg runs the index writer and the preload; Service.Stop waits for
	// them, so that the writer's last flush is done before it returns.
	bg sync.WaitGroup
}

// Service is the context service as micro registered it, with a Stop
// that also ends the service's own work.
type Service struct {
	micro.Service
	cancel context.CancelFunc
	bg     *sync.WaitGroup
}

// Stop stops answering, ends the index writer and the preload, and waits
// for them: the writer first writes the indexes read since their last
// write (at most indexFlushTimeout), so that a restart loads them.
func (s *Service) Stop() error {
	err := s.Service.Stop()
	s.cancel()
	s.bg.Wait()
	return err
}

// Start registers the service on nc and serves until ctx ends or the
// returned service is stopped. The inbound stream must exist (the
// processor provisions it before calling Start).
//
// Handlers run on micro's per-endpoint subscription goroutine, one request
// at a time per endpoint and process: micro's stats (processing time,
// errors) are only right when the handler answers before it returns, and
// more throughput comes from more processor instances in the queue group.
//
// Options: IndexBytes (the recall index's memory budget), Registerer (its
// metrics), Clock, Admission (the processor's acceptance rules).
func Start(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, layout broker.Layout, store *state.Store, tokens TokenCounter, log zerolog.Logger, opts ...Option) (*Service, error) {
	if nc == nil {
		return nil, errors.New("service: NATS connection, JetStream and store are required")
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := newServer(ctx, js, layout, store, tokens, log, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			cancel()
			s.bg.Wait()
		}
	}()
	ms, err := micro.AddService(nc, micro.Config{
		Name:        client.ServiceName,
		Version:     Version,
		Description: "foldstream: packed session contexts (summary + verbatim turns) and session state for prompt builders",
		Metadata:    map[string]string{"prefix": layout.Subjects.Prefix, "wire": "v1"},
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			log.Error().Str("event", "service_error").Str("subject", err.Subject).Str("error", err.Description).Msg("service subscription error")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("service: register %s: %w", client.ServiceName, err)
	}
	svc := &Service{Service: ms, cancel: cancel, bg: &s.bg}
	g := svc.AddGroup(layout.Subjects.Prefix + ".svc")
	endpoints := []struct {
		name, desc string
		h          func(context.Context, micro.Request)
	}{
		{client.EndpointContext, `{"session","budget_chars"?,"budget_tokens"?,"query"?,"recall_turns"?} → summary (or, in mode evict, the eviction note), verbatim turns from the cursor; with a query, also the matching memories and earlier turns`, s.handleContext},
		{client.EndpointSession, `{"session"} → cursor, total, version, covered_through, last fold, lease, pending notes, applied_seq, stream_last_seq, caught_up`, s.handleSession},
		{client.EndpointRecall, `{"v","session","query","limit"?,"scope"?} → the best-matching turns (BM25), by default of those before the cursor`, s.handleRecall},
	}
	for _, ep := range endpoints {
		if err := g.AddEndpoint(ep.name, micro.ContextHandler(ctx, ep.h),
			micro.WithEndpointMetadata(map[string]string{"description": ep.desc, "format": "application/json"})); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("service: endpoint %s: %w", ep.name, err)
		}
	}
	// Subscriptions go out asynchronously; flush so that the service
	// answers as soon as Start returns.
	if err := nc.Flush(); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("service: flush subscriptions: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = ms.Stop()
	}()
	started = true
	info := svc.Info()
	log.Info().Str("event", "service_started").Str("name", info.Name).Str("id", info.ID).Str("version", info.Version).
		Str("subjects", layout.Subjects.Prefix+".svc.>").Msg("context service started")
	return svc, nil
}

// newServer is the service's state, not registered on NATS yet.
func newServer(ctx context.Context, js jetstream.JetStream, layout broker.Layout, store *state.Store, tokens TokenCounter, log zerolog.Logger, opts ...Option) (*server, error) {
	if js == nil || store == nil {
		return nil, errors.New("service: NATS connection, JetStream and store are required")
	}
	if tokens == nil {
		tokens = (*tokencount.Counter)(nil) // counts with the chars/4×1.2 heuristic
	}
	in, err := js.Stream(ctx, layout.In)
	if err != nil {
		return nil, fmt.Errorf("service: inbound stream %s: %w", layout.In, err)
	}
	s := &server{js: js, in: in, layout: layout, subj: layout.Subjects, store: store, tokens: tokens, log: log, now: time.Now,
		adm: state.DefaultAdmission(), indexBytes: DefaultIndexBytes, storeBytes: DefaultIndexStoreBytes, an: newAnalyzer()}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if s.indexBytes < 0 {
		return nil, fmt.Errorf("service: recall index budget: expected a non-negative number of bytes, got %d", s.indexBytes)
	}
	if s.storeBytes < 0 {
		return nil, fmt.Errorf("service: recall index store: expected a non-negative number of bytes, got %d", s.storeBytes)
	}
	if s.storeBytes > 0 {
		if s.pack, err = newPacker(); err != nil {
			return nil, fmt.Errorf("service: recall index packing: %w", err)
		}
	}
	if s.indexBytes > 0 {
		s.index = newIndexCache(s.indexBytes, s.reg)
		if s.storeBytes > 0 {
			s.istore = newIndexStore(js, recallBucket(layout, s.storeKind), s.storeBytes, s.storeKind, log, s.reg)
			if s.storeChunked {
				s.istore.forceInline = 0
			}
			s.index.evicted = s.istore.enqueue
			s.istore.preloading.Set(1)
			s.bg.Go(func() { s.runIndexWriter(ctx) })
			s.bg.Go(func() { s.preload(ctx) })
		}
	}
	s.memoryFailures = newMemoryFailures(s.reg)
	if s.embedCfg != nil {
		if s.vec, err = newVectors(*s.embedCfg, strings.TrimSuffix(layout.Bucket, "_SESSIONS")+"_VECTORS", s.reg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// reqError is a failure the service reports with a micro error code.
type reqError struct {
	code string
	desc string
	err  error
}

func (e *reqError) Error() string { return e.code + " " + e.desc }
func (e *reqError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) *reqError {
	return &reqError{code: client.ErrCodeBadRequest, desc: fmt.Sprintf(format, args...)}
}

func internal(err error, format string, args ...any) *reqError {
	return &reqError{code: client.ErrCodeInternal, desc: fmt.Sprintf(format, args...) + ": " + err.Error(), err: err}
}

// checkpointError reports a checkpoint that cannot be decoded as what it
// is, not as an internal error to retry at once: the processor quarantines
// it (kept on the dead-letter stream) and rebuilds the session from the
// streams when it next handles the session.
func checkpointError(session string, err error) *reqError {
	if errors.Is(err, state.ErrCorrupt) {
		return &reqError{code: client.ErrCodeUnavailable, err: err,
			desc: fmt.Sprintf("session %q is quarantined: %v; the processor rebuilds it from the streams at the session's next event (the stored checkpoint is kept on the dead-letter stream)", session, err)}
	}
	return internal(err, "reading the checkpoint")
}

func (s *server) respond(req micro.Request, endpoint, session string, started time.Time, reply any, err error) {
	if err != nil {
		var re *reqError
		if !errors.As(err, &re) {
			re = internal(err, "internal error")
		}
		// A bad or unknown session is the caller's business (and counted in
		// micro's stats); only a failure on our side is worth an operator's
		// attention.
		lvl := s.log.Debug()
		if re.code == client.ErrCodeInternal {
			lvl = s.log.Error()
		}
		lvl.Str("event", "service_request_failed").Str("endpoint", endpoint).Str("session", session).
			Str("code", re.code).Str("error", re.desc).Msg("service request failed")
		if rerr := req.Error(re.code, re.desc, nil); rerr != nil {
			s.log.Warn().Err(rerr).Str("event", "service_reply_failed").Str("endpoint", endpoint).Msg("could not send error reply")
		}
		return
	}
	if rerr := req.RespondJSON(reply); rerr != nil {
		s.log.Warn().Err(rerr).Str("event", "service_reply_failed").Str("endpoint", endpoint).Msg("could not send reply")
		return
	}
	s.log.Debug().Str("event", "service_request").Str("endpoint", endpoint).Str("session", session).
		Dur("took", time.Since(started)).Msg("service request answered")
}

// decode reads a JSON request and checks its session id. A field of the
// wrong JSON type (or a number its Go type cannot hold: a budget past
// int64) is named, as a client's validation names it.
func decode(data []byte, v any, session func() string) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badRequest("bad request: field %q: expected a JSON %s, got %s", te.Field, jsonKind(te.Type), te.Value)
		}
		return badRequest("bad request: expected a JSON object like {\"session\":\"s1\"}: %v", err)
	}
	if err := events.CheckSession("session", session()); err != nil {
		return badRequest("bad session id: %v", err)
	}
	return nil
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("integer of %d bits", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("non-negative integer of %d bits", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}

func (s *server) handleContext(ctx context.Context, req micro.Request) {
	started := time.Now()
	var r client.ContextRequest
	err := decode(req.Data(), &r, func() string { return r.Session })
	var reply *client.Context
	if err == nil {
		if verr := checkContext(req.Data(), &r); verr != nil {
			err = badRequest("bad request: %v", verr)
		} else {
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			reply, err = s.assemble(rctx, r)
			cancel()
		}
	}
	s.respond(req, client.EndpointContext, r.Session, started, reply, err)
}

// checkContext is client.CheckContext, plus what only the wire shows: a
// query sent empty ("query":"") is refused, not taken for no query.
func checkContext(data []byte, r *client.ContextRequest) error {
	if r.Query == "" {
		var q struct {
			Query *string `json:"query"`
		}
		if json.Unmarshal(data, &q) == nil && q.Query != nil {
			return fmt.Errorf("field \"query\": expected 1..%d characters, got an empty string (omit the field for a context without a query)", client.MaxContextQueryChars)
		}
	}
	return client.CheckContext(r)
}

func (s *server) handleSession(ctx context.Context, req micro.Request) {
	started := time.Now()
	var r client.SessionRequest
	err := decode(req.Data(), &r, func() string { return r.Session })
	var reply *client.SessionInfo
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		reply, err = s.sessionInfo(rctx, r.Session)
		cancel()
	}
	s.respond(req, client.EndpointSession, r.Session, started, reply, err)
}

func unknownSession(session, why string) *reqError {
	return &reqError{code: client.ErrCodeUnknownSession, desc: fmt.Sprintf("unknown session: %q %s", session, why)}
}

// sessionInfo reports the checkpoint as the processor last wrote it.
func (s *server) sessionInfo(ctx context.Context, session string) (*client.SessionInfo, error) {
	cp, rev, err := s.store.Load(ctx, session)
	if err != nil {
		return nil, checkpointError(session, err)
	}
	if rev == 0 {
		return nil, unknownSession(session, "has no checkpoint (never seen, or the processor has not applied its first event yet)")
	}
	info := &client.SessionInfo{
		V: events.Version, Session: session, Version: cp.Version, SummaryChars: len([]rune(cp.Summary)),
		Cursor: cp.Cursor, TotalTurns: cp.Total, CoveredThroughTurn: cp.CoveredThrough,
		Compactions: cp.Compactions, PendingNotes: len(cp.PendingNotes), Failures: cp.Failures,
		Ended: cp.Ended, Config: cp.Config, LastSeq: cp.LastSeq, AppliedSeq: cp.LastSeq,
		SummaryIsNote: cp.SummaryIsNote, Evicted: cp.Evicted, EvictedTokens: cp.EvictedTokens,
		LastFoldAt: timePtr(cp.LastFoldAt), RetryAfter: timePtr(cp.RetryAfter), LastActivity: timePtr(cp.LastActivity),
	}
	if l := cp.Lease; l != nil {
		info.Lease = &client.LeaseInfo{FoldID: l.FoldID, Owner: l.Owner, Deadline: l.Deadline, From: l.From, To: l.To,
			Notes: l.Notes, Held: l.Held(s.now())}
	}
	if err := s.fillLag(ctx, cp, info); err != nil {
		return nil, err
	}
	return info, nil
}

// fillLag fills in how far the checkpoint is behind the inbound stream:
// the session's newest stream sequence, and how many events after the
// checkpoint the processor will still apply. It applies the tail to cp
// (a copy loaded for this request) by the processor's rules, so that an
// event the processor rejects (dead-lettered, never applied) or drops as
// a duplicate does not leave the session looking behind forever.
func (s *server) fillLag(ctx context.Context, cp *state.Session, info *client.SessionInfo) error {
	last, err := broker.LastSessionEvent(ctx, s.in, s.subj, cp.ID)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return internal(err, "reading the last event of the session in stream %s", s.layout.In)
	default:
		info.StreamLastSeq = last.Sequence
	}
	if info.StreamLastSeq > info.AppliedSeq {
		pending, err := s.pendingEvents(ctx, cp)
		if err != nil {
			return err
		}
		info.PendingEvents = pending
	}
	info.CaughtUp = info.PendingEvents == 0
	return nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
