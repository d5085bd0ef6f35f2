package inspect

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
)

// liveEvent is what the page is told when something happens to the
// session: which stream and kind, never the payload (the page fetches what
// it shows through the routes that apply the text policy).
type liveEvent struct {
	Stream string `json:"stream"` // in, out or dlq
	Kind   string `json:"kind"`
	// Version is set for a summary-updated event.
	Version uint64 `json:"version,omitempty"`
}

// handleLive streams the session's events as server-sent events, from
// core NATS subscriptions on the subjects bots and the processor publish
// to (<prefix>.in.<s>.>, <prefix>.out.<s>.>, the dead-letter subject). It
// only subscribes: nothing is acknowledged or consumed from a stream.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	ch := make(chan *nats.Msg, 256)
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}()
	for _, subject := range []string{s.subj.Prefix + ".in." + id + ".>", s.subj.OutSession(id), s.subj.DeadLetter(id)} {
		sub, err := s.cfg.NC.ChanSubscribe(subject, ch)
		if err != nil {
			httpError(w, http.StatusBadGateway, fmt.Sprintf("subscribe %s: %v", subject, err))
			return
		}
		// A burst larger than the buffer drops notices, not data: the page
		// reloads what it shows on the next one anyway.
		_ = sub.SetPendingLimits(1024, 1<<20)
		subs = append(subs, sub)
	}
	if err := s.cfg.NC.Flush(); err != nil {
		httpError(w, http.StatusBadGateway, "subscribe: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": subscribed\n\n")
	flusher.Flush()
	keepalive := time.NewTicker(20 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
			flusher.Flush()
		case m := <-ch:
			ev := s.liveEvent(m)
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Stream, b)
			flusher.Flush()
		}
	}
}

func (s *Server) liveEvent(m *nats.Msg) liveEvent {
	if _, kind, err := s.subj.ParseIn(m.Subject); err == nil {
		return liveEvent{Stream: "in", Kind: kind}
	}
	if _, kind, ok := s.subj.ParseOut(m.Subject); ok {
		ev := liveEvent{Stream: "out", Kind: kind}
		if kind == events.KindSummary {
			var v struct {
				Version uint64 `json:"version"`
			}
			if json.Unmarshal(m.Data, &v) == nil {
				ev.Version = v.Version
			}
		}
		return ev
	}
	return liveEvent{Stream: "dlq", Kind: "rejected"}
}
