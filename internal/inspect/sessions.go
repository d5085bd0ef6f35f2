package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/replay"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
)

// SessionRow is one line of the session list, from the session's KV
// checkpoint and the inbound stream.
type SessionRow struct {
	Session      string     `json:"session"`
	Mode         string     `json:"mode"`
	Turns        int64      `json:"turns"`
	Cursor       int64      `json:"cursor"`
	Version      uint64     `json:"version"`
	SummaryChars int        `json:"summary_chars"`
	PendingNotes int        `json:"pending_notes"`
	LastSeq      uint64     `json:"last_seq"`
	Lease        *LeaseRow  `json:"lease,omitempty"`
	Failures     int        `json:"failures,omitempty"`
	RetryAfter   *time.Time `json:"retry_after,omitempty"`
	Ended        bool       `json:"ended,omitempty"`
	LastFoldAt   *time.Time `json:"last_fold_at,omitempty"`
	LastActivity *time.Time `json:"last_activity,omitempty"`
	// Lag is how far the checkpoint is behind the inbound stream: the
	// oldest stored event of the session after the checkpoint's LastSeq.
	// Nil when the checkpoint covers everything stored.
	Lag *Lag   `json:"lag,omitempty"`
	Err string `json:"error,omitempty"` // the row could not be read whole

	summaryState []byte // the checkpoint's SummaryState (detail only)
}

// LeaseRow is a fold lease as the list shows it.
type LeaseRow struct {
	FoldID   string    `json:"fold_id"`
	Owner    string    `json:"owner"`
	From     int64     `json:"from"`
	To       int64     `json:"to"`
	Deadline time.Time `json:"deadline"`
	Held     bool      `json:"held"`
}

// Lag is the oldest inbound event the checkpoint does not cover yet. Under
// load the processor writes checkpoints behind (--flush-interval), so a lag
// of about that much is normal; more means it is falling behind or stopped.
type Lag struct {
	Seq     uint64    `json:"seq"`
	At      time.Time `json:"at"`
	Seconds float64   `json:"seconds"`
}

// SessionList is the reply of /api/sessions.
type SessionList struct {
	Total    int          `json:"total"` // sessions matching the search
	Offset   int          `json:"offset"`
	Sessions []SessionRow `json:"sessions"`
}

// handleSessions lists checkpointed sessions whose id contains q, sorted
// by id, one page at a time: the whole list is only key names, the rows of
// a page are read from their checkpoints.
func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	offset, err := intParam(r, "offset", 0, 0)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := intParam(r, "limit", 50, 500)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q")))
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ids, err := s.sessionIDs(ctx)
	if err != nil {
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	if q != "" {
		ids = slices.DeleteFunc(ids, func(id string) bool { return !strings.Contains(strings.ToLower(id), q) })
	}
	out := SessionList{Total: len(ids), Offset: offset, Sessions: []SessionRow{}}
	if offset < len(ids) {
		in, err := s.inbound(ctx)
		if err != nil {
			httpError(w, http.StatusBadGateway, err.Error())
			return
		}
		for _, id := range ids[offset:min(len(ids), offset+limit)] {
			out.Sessions = append(out.Sessions, s.row(ctx, in, id))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionIDs lists the bucket's checkpoint keys. A checkpoint's key is the
// session id, one token; sealed chunks ("<id>.refs.<epoch>.<k>") and due
// marks ("=due.<id>") have more, so the one-token filter skips them.
func (s *Server) sessionIDs(ctx context.Context) ([]string, error) {
	lister, err := s.cfg.KV.ListKeysFiltered(ctx, "*")
	if err != nil {
		return nil, err
	}
	var ids []string
	for k := range lister.Keys() {
		if events.ValidSession(k) {
			ids = append(ids, k)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// inboundView is the inbound stream and its consumers' ack floor, read
// once per request for all the rows it serves.
type inboundView struct {
	st    jetstream.Stream
	floor uint64
}

func (s *Server) inbound(ctx context.Context) (inboundView, error) {
	st, err := s.cfg.JS.Stream(ctx, s.cfg.Layout.In)
	if err != nil {
		return inboundView{}, fmt.Errorf("stream %s: %w", s.cfg.Layout.In, err)
	}
	floor, err := ackFloor(ctx, st)
	if err != nil {
		return inboundView{}, fmt.Errorf("consumers of %s: %w", s.cfg.Layout.In, err)
	}
	return inboundView{st: st, floor: floor}, nil
}

func (s *Server) row(ctx context.Context, in inboundView, id string) SessionRow {
	row := SessionRow{Session: id, Mode: string(s.cfg.WhatIf.Base.Mode)}
	e, err := s.cfg.KV.Get(ctx, id)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			row.Err = "no checkpoint (deleted after the list was read)"
		} else {
			row.Err = "checkpoint: " + err.Error()
		}
		return row
	}
	cp, err := state.Decode(id, e.Value())
	if err != nil {
		row.Err = "checkpoint does not decode: " + err.Error()
		return row
	}
	now := s.now()
	if cp.Config != nil && cp.Config.Mode != "" {
		row.Mode = cp.Config.Mode
	}
	row.Turns, row.Cursor, row.Version = cp.Total, cp.Cursor, cp.Version
	row.SummaryChars = len([]rune(cp.Summary))
	row.summaryState = cp.SummaryState
	row.PendingNotes, row.LastSeq = len(cp.PendingNotes), cp.LastSeq
	row.Failures, row.Ended = cp.Failures, cp.Ended
	row.RetryAfter, row.LastFoldAt, row.LastActivity = timePtr(cp.RetryAfter), timePtr(cp.LastFoldAt), timePtr(cp.LastActivity)
	if l := cp.Lease; l != nil {
		row.Lease = &LeaseRow{FoldID: l.FoldID, Owner: l.Owner, From: l.From, To: l.To, Deadline: l.Deadline, Held: l.Held(now)}
	}
	lag, err := s.lag(ctx, in, id, cp.LastSeq, now)
	if err != nil {
		row.Err = "lag: " + err.Error()
	}
	row.Lag = lag
	return row
}

// lag finds the first stored inbound event of the session that no
// processor has dealt with: after the checkpoint's LastSeq (applied) and
// after the ack floor of the processor's consumers (a dead-lettered event
// is acknowledged without being applied, so LastSeq alone would report it
// as lag forever). With partitions the floor is the lowest of all
// partitions' consumers: a lagging partition shows on all sessions, which
// errs towards showing lag. One direct get by subject per inbound filter.
func (s *Server) lag(ctx context.Context, in inboundView, id string, seq uint64, now time.Time) (*Lag, error) {
	seq = max(seq, in.floor)
	var first *jetstream.RawStreamMsg
	for _, f := range s.subj.InSessionAll(id) {
		m, err := in.st.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if first == nil || m.Sequence < first.Sequence {
			first = m
		}
	}
	if first == nil {
		return nil, nil
	}
	return &Lag{Seq: first.Sequence, At: first.Time.UTC(), Seconds: max(0, now.Sub(first.Time).Seconds())}, nil
}

// ackFloor is the lowest ack floor of the inbound stream's durable
// consumers with explicit acks (the processor's; ephemeral readers such as
// replay's ordered consumers are not counted), 0 when there is none.
func ackFloor(ctx context.Context, st jetstream.Stream) (uint64, error) {
	var floor uint64
	found := false
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		if info.Config.Durable == "" || info.Config.AckPolicy != jetstream.AckExplicitPolicy {
			continue
		}
		if !found || info.AckFloor.Stream < floor {
			floor = info.AckFloor.Stream
		}
		found = true
	}
	if err := lister.Err(); err != nil {
		return 0, err
	}
	return floor, nil
}

// SessionDetail is the header of a session's page: the session service's
// answer (what builders see), the list row, and the timeline's totals.
type SessionDetail struct {
	Row         SessionRow          `json:"row"`
	Service     *client.SessionInfo `json:"service,omitempty"`
	ServiceErr  string              `json:"service_error,omitempty"`
	Totals      replay.Totals       `json:"totals"`
	LastFailure *FailureInfo        `json:"last_failure,omitempty"`
	// SummaryState is the summarizer's state beside the summary in the
	// checkpoint (the offline summarizer's statements, periods and
	// facts), as JSON when it is JSON, else as a base64 string.
	// It holds what was said: without the text header only its size is
	// shown.
	SummaryState      json.RawMessage `json:"summary_state,omitempty"`
	SummaryStateBytes int             `json:"summary_state_bytes,omitempty"`
}

// FailureInfo is the session's latest compaction_failed event.
type FailureInfo struct {
	At         time.Time `json:"at"`
	FoldID     string    `json:"fold_id,omitempty"`
	ErrorClass string    `json:"error_class,omitempty"`
	Retryable  bool      `json:"retryable"`
	Error      string    `json:"error,omitempty"`
	Model      string    `json:"model,omitempty"`
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	in, err := s.inbound(ctx)
	if err != nil {
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	d := SessionDetail{Row: s.row(ctx, in, id)}
	if s.textAllowed(r) {
		d.SummaryState = readableState(d.Row.summaryState) // it holds what was said
	} else if len(d.Row.summaryState) > 0 {
		d.SummaryStateBytes = len(d.Row.summaryState)
	}
	var info client.SessionInfo
	if err := request(ctx, s.cfg.NC, s.subj.Prefix, client.EndpointSession, client.SessionRequest{Session: id}, &info); err != nil {
		d.ServiceErr = err.Error()
	} else {
		d.Service = &info
	}
	tv, err := s.cache.get(ctx, id)
	if err != nil {
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	d.Totals = tv.tl.Totals
	for i := len(tv.tl.Entries) - 1; i >= 0; i-- {
		e := &tv.tl.Entries[i]
		if e.Kind == events.EventCompactionFailed && e.Event != nil {
			d.LastFailure = &FailureInfo{At: e.Time, FoldID: e.Event.FoldID, ErrorClass: e.Event.ErrorClass,
				Retryable: e.Event.Retryable != nil && *e.Event.Retryable, Error: e.Event.Error, Model: e.Event.Model}
			if !s.textAllowed(r) {
				d.LastFailure.Error = "" // a model's error may quote the prompt
			}
			break
		}
	}
	writeJSON(w, http.StatusOK, d)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// readableState is a summarizer state as the detail shows it: as it is
// when it is JSON, else quoted as base64; nil for none.
func readableState(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(b) // a []byte marshals as a base64 string
	return q
}
