package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/replay"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// WhatIfRequest are the settings a refold changes; zero fields keep the
// processor's. Query and the budgets are for the context asked at the end.
type WhatIfRequest struct {
	Mode            string `json:"mode,omitempty"`
	RecentWindow    int    `json:"recent_window,omitempty"`
	BatchSize       int    `json:"batch_size,omitempty"`
	MaxSummaryChars int    `json:"max_summary_chars,omitempty"`
	Summarizer      string `json:"summarizer,omitempty"`
	Query           string `json:"query,omitempty"`
	BudgetChars     int    `json:"budget_chars,omitempty"`
	BudgetTokens    int    `json:"budget_tokens,omitempty"`
}

// SummaryVersion is one summary of a session, real or refolded.
type SummaryVersion struct {
	Version     uint64   `json:"version"`
	FoldedFrom  int64    `json:"folded_from"`
	Cursor      int64    `json:"cursor"`
	Chars       int      `json:"chars"`
	Tier        string   `json:"tier"`
	Model       string   `json:"model"`
	Mode        string   `json:"mode"`
	LatencyMS   int64    `json:"latency_ms"`
	Summary     string   `json:"summary,omitempty"`
	Diff        []DiffOp `json:"diff,omitempty"`
	PrevVersion uint64   `json:"prev_version,omitempty"`
}

// Side is the result of one folding of the session: the real one (what
// the streams hold) or the refold's.
type Side struct {
	Summaries  []SummaryVersion `json:"summaries"`
	Totals     replay.Totals    `json:"totals"`
	Context    *ContextView     `json:"context,omitempty"`
	ContextErr string           `json:"context_error,omitempty"`
}

// WhatIfResult is the reply of /api/sessions/{id}/whatif.
type WhatIfResult struct {
	Session  string        `json:"session"`
	Settings WhatIfRequest `json:"settings"` // with the processor's values filled in
	Events   int           `json:"events"`   // inbound events replayed
	Settled  bool          `json:"settled"`  // false: the refold hit its timeout, results are partial
	TookMS   int64         `json:"took_ms"`
	Real     Side          `json:"real"`
	WhatIf   Side          `json:"whatif"`
	// Compare is the word diff from the real latest summary to the
	// refold's: what the other settings would have kept and dropped.
	Compare  []DiffOp `json:"compare,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

func (s *Server) handleWhatIf(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	// A JSON body only: a cross-site form cannot send one without a
	// preflight, so another page cannot make a reader's browser start
	// refolds.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "expected Content-Type: application/json")
		return
	}
	var req WhatIfRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "what-if settings: expected a JSON object {mode, recent_window, batch_size, max_summary_chars, summarizer, query, budget_chars, budget_tokens}: "+err.Error())
		return
	}
	select {
	case s.whatIf <- struct{}{}:
		defer func() { <-s.whatIf }()
	case <-r.Context().Done():
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.WhatIf.Timeout)
	defer cancel()
	res, err := s.refold(ctx, id, req, s.textAllowed(r))
	if err != nil {
		var be *badRequestError
		if errors.As(err, &be) {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}

type badRequestError struct{ msg string }

func (e *badRequestError) Error() string { return e.msg }

// settings applies req to the processor's configuration.
func (s *Server) settings(req *WhatIfRequest) (processor.Config, fold.Summarizer, error) {
	cfg := s.cfg.WhatIf.Base
	if req.Mode != "" {
		if _, ok := fold.Lookup(fold.Mode(req.Mode)); !ok {
			return cfg, nil, &badRequestError{fmt.Sprintf("field \"mode\": expected one of %s, got %q", strings.Join(fold.ModeNames(), ", "), req.Mode)}
		}
		cfg.Mode = fold.Mode(req.Mode)
	}
	for _, f := range []struct {
		name string
		v    int
		dst  *int
	}{
		{"recent_window", req.RecentWindow, &cfg.Window.Recent},
		{"batch_size", req.BatchSize, &cfg.Window.Batch},
		{"max_summary_chars", req.MaxSummaryChars, &cfg.Window.MaxSummaryChars},
	} {
		if f.v < 0 {
			return cfg, nil, &badRequestError{fmt.Sprintf("field %q: expected a positive integer (0 keeps the processor's), got %d", f.name, f.v)}
		}
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	if req.BudgetChars < 0 || req.BudgetTokens < 0 {
		return cfg, nil, &badRequestError{"fields \"budget_chars\" and \"budget_tokens\": expected non-negative integers (0 = unlimited)"}
	}
	if req.Summarizer == "" {
		req.Summarizer = "offline"
	}
	mk, ok := s.cfg.WhatIf.Summarizers[req.Summarizer]
	if !ok {
		names := make([]string, 0, len(s.cfg.WhatIf.Summarizers))
		for n := range s.cfg.WhatIf.Summarizers {
			names = append(names, n)
		}
		slices.Sort(names)
		return cfg, nil, &badRequestError{fmt.Sprintf("field \"summarizer\": expected one of %s, got %q", strings.Join(names, ", "), req.Summarizer)}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, &badRequestError{err.Error()}
	}
	sum, err := mk()
	if err != nil {
		return cfg, nil, err
	}
	req.Mode, req.RecentWindow, req.BatchSize, req.MaxSummaryChars = string(cfg.Mode), cfg.Window.Recent, cfg.Window.Batch, cfg.Window.MaxSummaryChars
	// The scratch processor is alone with one session: write checkpoints
	// at once and do not wait out a failing model's long backoff.
	cfg.FlushInterval = 5 * time.Millisecond
	cfg.RetryBackoff, cfg.RetryBackoffMax = 50*time.Millisecond, time.Second
	cfg.Consumer, cfg.FilterSubjects, cfg.Owns, cfg.InstanceID = "", nil, nil, "whatif"
	return cfg, sum, nil
}

// refold replays the session's inbound events into a scratch nats-server
// (in-process, no listener, memory storage, its own temporary directory)
// with a processor and a context service of their own, waits until they
// have applied everything and no fold is left, and reads the results back
// with the same code that reads the real ones. Nothing is written to the
// live server: the only live operations are the reads of replay.
func (s *Server) refold(ctx context.Context, id string, req WhatIfRequest, text bool) (*WhatIfResult, error) {
	started := time.Now()
	cfg, sum, err := s.settings(&req)
	if err != nil {
		return nil, err
	}
	res := &WhatIfResult{Session: id, Settings: req}
	msgs, complete, err := replay.Inbound(ctx, s.cfg.JS, s.cfg.Layout, id)
	if err != nil {
		return nil, err
	}
	if !complete {
		res.Warnings = append(res.Warnings, "the inbound stream stopped delivering early (expired or purged messages): the refold saw part of the session")
	}
	res.Events = len(msgs)
	msgs, ahead := dropClockRejected(msgs, s.subj, s.cfg.WhatIf.Base.Admission())
	if ahead > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d events the live processor rejected for their time (at beyond --max-clock-skew when the stream stored them) are left out: sent again now, they would be judged against a later clock", ahead))
	}

	// The real side, from the live streams and service.
	real, err := s.cache.get(ctx, id)
	if err != nil {
		return nil, err
	}
	res.Real = side(real, text)
	var rc client.Context
	creq := client.ContextRequest{Session: id, Query: req.Query, BudgetChars: req.BudgetChars, BudgetTokens: req.BudgetTokens}
	if err := request(ctx, s.cfg.NC, s.subj.Prefix, client.EndpointContext, creq, &rc); err != nil {
		res.Real.ContextErr = err.Error()
	} else {
		v := contextView(&rc, text)
		res.Real.Context = &v
	}

	sc, err := startScratch(ctx, s.subj.Prefix, s.log)
	if err != nil {
		return nil, err
	}
	defer sc.close()
	// The scratch processor's routine logs (started, stopped, folds) would
	// read like the live processor's: only its warnings and errors are
	// kept, marked as the refold's.
	plog := s.log.With().Str("component", "whatif").Str("whatif_session", id).Logger().Level(max(zerolog.WarnLevel, s.log.GetLevel()))
	p, err := processor.New(cfg, processor.Deps{
		JS: sc.js, Layout: sc.layout, Store: sc.store, Summarizer: sum, Tokens: s.cfg.WhatIf.Tokens,
		Log: plog, Clock: processor.SystemClock{}, Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		return nil, err
	}
	pctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() {
		stop()
		<-done
	}()
	select {
	case <-p.Ready():
	case err := <-done:
		return nil, fmt.Errorf("what-if processor: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	svcCtx, stopSvc := context.WithCancel(ctx)
	defer stopSvc()
	if _, err := service.Start(svcCtx, sc.nc, sc.js, sc.layout, sc.store, s.cfg.WhatIf.Tokens, zerolog.Nop(), service.Admission(cfg.Admission())); err != nil {
		return nil, err
	}
	last, err := sc.publish(ctx, s.subj, msgs)
	if err != nil {
		return nil, err
	}
	res.Settled = sc.settle(ctx, p, id, last)
	if !res.Settled {
		res.Warnings = append(res.Warnings, "the refold did not finish within its timeout: the results below are what it had done by then")
	}
	// The reads below must run even when ctx ran out.
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tl, err := replay.Load(rctx, sc.js, sc.layout, id)
	if err != nil {
		return nil, fmt.Errorf("what-if: read the refold's streams: %w", err)
	}
	res.WhatIf = side(derive(tl), text)
	var wc client.Context
	if err := request(rctx, sc.nc, s.subj.Prefix, client.EndpointContext, creq, &wc); err != nil {
		res.WhatIf.ContextErr = err.Error()
	} else {
		v := contextView(&wc, text)
		res.WhatIf.Context = &v
	}
	res.Compare = compare(res.Real.Summaries, res.WhatIf.Summaries, text)
	res.TookMS = time.Since(started).Milliseconds()
	s.log.Info().Str("event", "whatif_refold").Str("session", id).Int("events", res.Events).Bool("settled", res.Settled).
		Str("mode", req.Mode).Int("recent_window", req.RecentWindow).Int("batch_size", req.BatchSize).
		Int("max_summary_chars", req.MaxSummaryChars).Str("summarizer", req.Summarizer).
		Int("versions", len(res.WhatIf.Summaries)).Int64("took_ms", res.TookMS).Msg("what-if refold done")
	return res, nil
}

// compare diffs the latest real summary against the latest refolded one.
func compare(real, whatIf []SummaryVersion, text bool) []DiffOp {
	if len(real) == 0 && len(whatIf) == 0 {
		return nil
	}
	var a, b string
	if len(real) > 0 {
		a = real[len(real)-1].Summary
	}
	if len(whatIf) > 0 {
		b = whatIf[len(whatIf)-1].Summary
	}
	if !text {
		return nil // the summaries were redacted already; a diff of nothing says nothing
	}
	return WordDiff(a, b)
}

// side lists a timeline's summary versions with their diffs.
func side(v *timelineView, text bool) Side {
	out := Side{Summaries: []SummaryVersion{}, Totals: v.tl.Totals}
	for i := range v.tl.Entries {
		e := &v.tl.Entries[i]
		if e.Kind != replay.KindSummary || e.Summary == nil {
			continue
		}
		it := v.item(i, text)
		sm := it.Summary
		out.Summaries = append(out.Summaries, SummaryVersion{
			Version: sm.Version, FoldedFrom: sm.FoldedFrom, Cursor: sm.Cursor, Chars: sm.SummaryChars,
			Tier: sm.Tier, Model: sm.Model, Mode: sm.Mode, LatencyMS: sm.LatencyMS, Summary: sm.Summary,
			Diff: it.Diff, PrevVersion: it.PrevVersion,
		})
	}
	return out
}

// scratch is a what-if refold's own server: in-process, without a
// listener, memory storage, removed when the refold ends.
type scratch struct {
	dir string
	ns  interface {
		Shutdown()
		WaitForShutdown()
	}
	nc     *nats.Conn
	js     jetstream.JetStream
	layout broker.Layout
	store  *state.Store
}

func startScratch(ctx context.Context, prefix string, log zerolog.Logger) (*scratch, error) {
	subjects, err := events.NewSubjects(prefix)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "foldstream-whatif-")
	if err != nil {
		return nil, fmt.Errorf("what-if: scratch directory: %w", err)
	}
	sc := &scratch{dir: dir, layout: broker.NewLayout(subjects)}
	ns, err := broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: dir, Port: -1, NoListen: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("what-if: scratch server: %w", err)
	}
	sc.ns = ns
	if sc.nc, err = broker.Connect(broker.ConnConfig{Name: "foldstream-whatif"}, ns, zerolog.Nop()); err != nil {
		sc.close()
		return nil, err
	}
	if sc.js, err = jetstream.New(sc.nc); err != nil {
		sc.close()
		return nil, err
	}
	kv, err := broker.Provision(ctx, sc.js, sc.layout, broker.ProvisionConfig{Storage: jetstream.MemoryStorage}, zerolog.Nop())
	if err != nil {
		sc.close()
		return nil, fmt.Errorf("what-if: provision the scratch server: %w", err)
	}
	sc.store = state.NewStore(sc.js, kv)
	return sc, nil
}

func (sc *scratch) close() {
	if sc.nc != nil {
		sc.nc.Close()
	}
	if sc.ns != nil {
		sc.ns.Shutdown()
		sc.ns.WaitForShutdown()
	}
	_ = os.RemoveAll(sc.dir)
}

// publish sends the session's inbound messages to the scratch server in
// their stream order, each to the subject the bot published it on (a
// stored partitioned subject is mapped back), with its headers (its
// Nats-Msg-Id dedups as it did live). It returns the scratch inbound
// stream's last sequence.
func (sc *scratch) publish(ctx context.Context, live events.Subjects, msgs []replay.Message) (uint64, error) {
	for _, m := range msgs {
		subject := m.Subject
		if session, kind, err := live.ParseIn(m.Subject); err == nil {
			subject = sc.layout.Subjects.In(session, kind)
		} else if !strings.HasPrefix(subject, live.Prefix+".in.") {
			continue // not a subject a bot could have sent
		}
		nm := &nats.Msg{Subject: subject, Data: m.Data, Header: nats.Header{}}
		for k, v := range m.Header {
			if !strings.HasPrefix(k, "Nats-Expected") {
				nm.Header[k] = v
			}
		}
		if _, err := sc.js.PublishMsgAsync(nm); err != nil {
			return 0, fmt.Errorf("what-if: publish to the scratch server: %w", err)
		}
	}
	select {
	case <-sc.js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	st, err := sc.js.Stream(ctx, sc.layout.In)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// dropClockRejected leaves out the messages whose at the live processor
// rejected (adm's clock check against the time the stream stored them).
// The scratch stream stores every message again at the time of the
// refold, so such an event, once its time has passed, would be applied
// there although the live processor never applied it. It returns the
// messages kept and how many it left out.
func dropClockRejected(msgs []replay.Message, live events.Subjects, adm state.Admission) ([]replay.Message, int) {
	kept := make([]replay.Message, 0, len(msgs))
	for _, m := range msgs {
		if session, kind, err := live.ParseIn(m.Subject); err == nil {
			if in, err := events.DecodeInbound(kind, session, m.Data, adm.Limits); err == nil && in.CheckClock(m.Time, adm.MaxClockSkew) != nil {
				continue
			}
		}
		kept = append(kept, m)
	}
	return kept, len(msgs) - len(kept)
}

// settle waits until the scratch processor has acknowledged every event
// (so its checkpoint covers them) and its folds have stopped: no lease in
// the checkpoint and no fold landing for a few polls in a row, since a
// fold that lands may start the next (catch-up) at once. It returns false
// if ctx ends first.
func (sc *scratch) settle(ctx context.Context, p *processor.Processor, id string, last uint64) bool {
	const poll = 25 * time.Millisecond
	const quietPolls = 4
	quiet := 0
	var folds uint64
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		caught := sc.caughtUp(ctx, last)
		cp, _, err := sc.store.Load(ctx, id)
		idle := err == nil && cp.Lease == nil
		f := p.Folds()
		if caught && idle && f == folds {
			quiet++
		} else {
			quiet = 0
		}
		folds = f
		if quiet >= quietPolls {
			return true
		}
	}
}

// caughtUp reports whether the scratch processor's consumer acknowledged
// everything up to last (the scratch stream has its one consumer).
func (sc *scratch) caughtUp(ctx context.Context, last uint64) bool {
	if last == 0 {
		return true
	}
	st, err := sc.js.Stream(ctx, sc.layout.In)
	if err != nil {
		return false
	}
	for info := range st.ListConsumers(ctx).Info() {
		if info.AckFloor.Stream >= last && info.NumAckPending == 0 {
			return true
		}
	}
	return false
}
