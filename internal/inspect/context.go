package inspect

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
)

// handleContext asks the context service for the session's packed
// context, with the query and budgets from the page, exactly as a builder
// does, and shows the reply.
func (s *Server) handleContext(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	req := client.ContextRequest{Session: id, Query: strings.TrimSpace(r.URL.Query().Get("query"))}
	var err error
	if req.BudgetChars, err = intParam(r, "budget_chars", 0, 0); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.BudgetTokens, err = intParam(r, "budget_tokens", 0, 0); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	var out client.Context
	if err := request(ctx, s.cfg.NC, s.subj.Prefix, client.EndpointContext, req, &out); err != nil {
		httpError(w, serviceStatus(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, contextView(&out, s.textAllowed(r)))
}

// ContextView is a packed context for the page: the service's reply and
// the prompt text a builder would send, or without any text for a reader
// who may not see it.
type ContextView struct {
	*client.Context
	Prompt   string `json:"prompt,omitempty"`
	Redacted bool   `json:"redacted,omitempty"`
}

func contextView(c *client.Context, text bool) ContextView {
	if text {
		return ContextView{Context: c, Prompt: c.Prompt()}
	}
	cp := *c
	if c.Summary != nil {
		sl := *c.Summary
		sl.Text, sl.Summary = "", ""
		cp.Summary = &sl
	}
	cp.Turns = make([]client.ContextTurn, len(c.Turns))
	for i, t := range c.Turns {
		t.Text = ""
		cp.Turns[i] = t
	}
	// The eviction note stays: counts and times, no transcript.
	return ContextView{Context: &cp, Redacted: true}
}
