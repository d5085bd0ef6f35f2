package inspect

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/replay"
)

func TestInspectorAPI(t *testing.T) {
	r := newRig(t, TextHeader)
	r.conversation("alpha", 61) // folds at 41, 51, 61
	r.conversation("beta-1", 20)
	r.reject("alpha")
	allowed := http.Header{DefaultTextHeader: {"allow"}}

	t.Run("sessions", func(t *testing.T) {
		var list SessionList
		r.get("/api/sessions", nil, http.StatusOK, &list)
		if list.Total != 2 || len(list.Sessions) != 2 || list.Sessions[0].Session != "alpha" || list.Sessions[1].Session != "beta-1" {
			t.Fatalf("sessions: got %+v, want alpha and beta-1", list)
		}
		a := list.Sessions[0]
		if a.Turns != 61 || a.Cursor != 30 || a.Version != 3 || a.Mode != "window" {
			t.Errorf("alpha: got turns %d cursor %d version %d mode %s, want 61, 30, 3, window", a.Turns, a.Cursor, a.Version, a.Mode)
		}
		// The rejected turn was acknowledged without being applied: it is
		// not lag.
		if a.Lag != nil {
			t.Errorf("alpha: lag %+v, want none (the processor dealt with everything)", a.Lag)
		}
		r.get("/api/sessions?q=BET", nil, http.StatusOK, &list)
		if list.Total != 1 || list.Sessions[0].Session != "beta-1" {
			t.Errorf("search BET: got %+v, want beta-1 only", list)
		}
		r.get("/api/sessions?limit=5000", nil, http.StatusBadRequest, nil)

		// The detail shows the summarizer's state beside the summary as
		// JSON, and only its size without the text header.
		var d, dr SessionDetail
		r.get("/api/sessions/alpha", allowed, http.StatusOK, &d)
		var st struct {
			V    int `json:"v"`
			Open []struct {
				Text string `json:"text"`
			} `json:"open"`
		}
		if err := json.Unmarshal(d.SummaryState, &st); err != nil || st.V < 1 || len(st.Open) == 0 {
			t.Errorf("alpha detail: summary state %s (%v), want the offline state as JSON", d.SummaryState, err)
		}
		r.get("/api/sessions/alpha", nil, http.StatusOK, &dr)
		if dr.SummaryState != nil || dr.SummaryStateBytes == 0 {
			t.Errorf("alpha detail without the header: state %s, %d bytes: want only its size", dr.SummaryState, dr.SummaryStateBytes)
		}
	})

	t.Run("timeline", func(t *testing.T) {
		var page TimelinePage
		r.get("/api/sessions/alpha/timeline?kinds=summaries,rejected", allowed, http.StatusOK, &page)
		var sums, rejected []Item
		for _, it := range page.Items {
			switch it.Kind {
			case replay.KindSummary:
				sums = append(sums, it)
			case replay.KindRejected:
				rejected = append(rejected, it)
			default:
				t.Errorf("kinds=summaries,rejected served a %s entry", it.Kind)
			}
		}
		if len(sums) != 3 || len(rejected) != 1 || page.Total != 4 {
			t.Fatalf("got %d summaries, %d rejected (total %d), want 3 and 1", len(sums), len(rejected), page.Total)
		}
		if sums[0].PrevVersion != 0 || sums[1].PrevVersion != 1 || sums[2].PrevVersion != 2 {
			t.Errorf("diff bases: got %d, %d, %d, want 0, 1, 2", sums[0].PrevVersion, sums[1].PrevVersion, sums[2].PrevVersion)
		}
		// The diff rebuilds the summary it is about from its previous one.
		for _, it := range sums {
			_, cur := apply(it.Diff)
			if cur != strings.Join(strings.Fields(it.Summary.Summary), " ") {
				t.Errorf("v%d: the diff does not rebuild the summary", it.Summary.Version)
			}
		}
		if rj := rejected[0].Rejected; rj.Code != "missing_field" || rj.Field != "speaker" {
			t.Errorf("rejected: got code %q field %q, want missing_field, speaker", rj.Code, rj.Field)
		}

		// Turns carry the version that folded them: v1 took turns 0–9.
		r.get("/api/sessions/alpha/timeline?kinds=turns&limit=1000", allowed, http.StatusOK, &page)
		for _, it := range page.Items {
			var want uint64
			switch i := it.Turn.Index; {
			case i < 0:
				continue
			case i < 10:
				want = 1
			case i < 20:
				want = 2
			case i < 30:
				want = 3
			}
			if it.FoldedBy != want {
				t.Errorf("turn %d: folded by v%d, want v%d", it.Turn.Index, it.FoldedBy, want)
			}
		}
		// Memory events as facts: who said each, in which turn and when,
		// and the text of the earlier fact a later one replaces (the
		// demo's conversation corrects one).
		r.get("/api/sessions/alpha/timeline?kinds=memories&limit=1000", allowed, http.StatusOK, &page)
		said, replaced := map[string]string{}, 0
		for _, it := range page.Items {
			if it.Memory == nil || len(it.Memory.Items) == 0 || it.Memory.Version == 0 {
				t.Fatalf("memory entry %d: got %+v, want its facts decoded", it.N, it.Memory)
			}
			for _, m := range it.Memory.Items {
				if m.ID == "" || m.Speaker == "" || m.Text == "" || m.TurnID == "" || m.At.IsZero() {
					t.Errorf("memory entry %d: fact %+v, want its id, speaker, text, turn and time", it.N, m)
				}
				if m.Supersedes != "" {
					replaced++
					if want, ok := said[m.Supersedes]; !ok || m.Replaces != want {
						t.Errorf("fact %s replaces %s: got %q, want the earlier fact's text %q", m.ID, m.Supersedes, m.Replaces, want)
					}
				}
				said[m.ID] = m.Text
			}
		}
		if len(said) == 0 || replaced == 0 {
			t.Errorf("memories: %d facts, %d replacing an earlier one; want both", len(said), replaced)
		}

		r.get("/api/sessions/alpha/timeline?tail=1&limit=10", allowed, http.StatusOK, &page)
		if page.Offset != page.Total-10 || len(page.Items) != 10 {
			t.Errorf("tail: got offset %d, %d items of %d, want the last 10", page.Offset, len(page.Items), page.Total)
		}
		r.get("/api/sessions/not%20a%20session/timeline", nil, http.StatusBadRequest, nil)
	})

	t.Run("text policy", func(t *testing.T) {
		var page TimelinePage
		r.get("/api/sessions/alpha/timeline?kinds=turns,summaries,memories&limit=1000", nil, http.StatusOK, &page)
		for _, it := range page.Items {
			if !it.Redacted || it.Turn != nil && it.Turn.Text != "" || it.Summary != nil && it.Summary.Summary != "" || len(it.Raw) > 0 {
				t.Fatalf("without the header, entry %d (%s) still has text", it.N, it.Kind)
			}
			if it.Memory != nil {
				for _, m := range it.Memory.Items {
					if m.Text != "" || m.Replaces != "" || m.Speaker == "" {
						t.Fatalf("without the header, memory entry %d: fact %+v, want its speaker without text", it.N, m)
					}
				}
			}
			for _, d := range it.Diff {
				if !strings.HasSuffix(d.Text, "words)") {
					t.Fatalf("without the header, a diff run has text %q", d.Text)
				}
			}
		}
		var c ContextView
		r.get("/api/sessions/alpha/context", nil, http.StatusOK, &c)
		if !c.Redacted || c.Prompt != "" || c.Summary == nil || c.Summary.Summary != "" || len(c.Turns) == 0 || c.Turns[0].Text != "" {
			t.Errorf("context without the header: got %+v, want it without text", c)
		}
		var ca ContextView
		r.get("/api/sessions/alpha/context?query=trip&budget_chars=2000", allowed, http.StatusOK, &ca)
		if ca.Redacted || ca.Prompt == "" || ca.Chars > 2000 || ca.BudgetChars != 2000 {
			t.Errorf("context with the header: got chars %d budget %d redacted %v", ca.Chars, ca.BudgetChars, ca.Redacted)
		}
		r.get("/api/sessions/alpha/context?budget_chars=-1", allowed, http.StatusBadRequest, nil)
	})

	t.Run("whatif", func(t *testing.T) {
		before := r.liveState()
		var res WhatIfResult
		r.do(http.MethodPost, "/api/sessions/alpha/whatif", http.Header{"Content-Type": {"application/json"}, DefaultTextHeader: {"allow"}},
			`{"recent_window": 20, "batch_size": 5, "max_summary_chars": 600}`, http.StatusOK, &res)
		if !res.Settled {
			t.Fatalf("refold did not settle: %+v", res.Warnings)
		}
		// Window 20, batch 5 over 61 turns: folds at 25, 30, …, 60, the
		// cursor ends at 40; the real one (window 30, batch 10) at 30.
		if got := len(res.WhatIf.Summaries); got != 8 {
			t.Errorf("what-if: %d summary versions, want 8", got)
		}
		if got := len(res.Real.Summaries); got != 3 {
			t.Errorf("real: %d summary versions, want 3", got)
		}
		for _, v := range res.WhatIf.Summaries {
			if v.Chars > 600 {
				t.Errorf("what-if v%d: %d chars, over the 600 asked", v.Version, v.Chars)
			}
		}
		if res.WhatIf.Context == nil || res.WhatIf.Context.Cursor != 40 || res.Real.Context == nil || res.Real.Context.Cursor != 30 {
			t.Fatalf("contexts: got what-if %+v, real %+v, want cursors 40 and 30", res.WhatIf.Context, res.Real.Context)
		}
		if res.WhatIf.Totals.DeadLetters != 1 {
			t.Errorf("what-if: %d dead letters, want the rejected turn again", res.WhatIf.Totals.DeadLetters)
		}
		if after := r.liveState(); after != before {
			t.Errorf("the refold changed the live server:\nbefore\n%safter\n%s", before, after)
		}
		r.do(http.MethodPost, "/api/sessions/alpha/whatif", http.Header{"Content-Type": {"application/json"}}, `{"mode": "fast"}`, http.StatusBadRequest, nil)
		r.do(http.MethodPost, "/api/sessions/alpha/whatif", http.Header{"Content-Type": {"text/plain"}}, `{}`, http.StatusUnsupportedMediaType, nil)
		r.do(http.MethodPost, "/api/sessions/alpha/whatif", http.Header{"Content-Type": {"application/json"}}, `{"summarizer": "gpt"}`, http.StatusBadRequest, nil)
	})

	t.Run("lag", func(t *testing.T) {
		r.stop()
		r.moreTurns("beta-1", 1)
		var list SessionList
		r.get("/api/sessions?q=beta", nil, http.StatusOK, &list)
		if len(list.Sessions) != 1 || list.Sessions[0].Lag == nil || list.Sessions[0].Lag.Seq <= list.Sessions[0].LastSeq {
			t.Fatalf("a turn the stopped processor has not applied: got %+v, want a lag from after the checkpoint", list.Sessions)
		}
	})

	t.Run("read-only", func(t *testing.T) {
		for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPost} {
			r.do(m, "/api/sessions/alpha", nil, "", http.StatusMethodNotAllowed, nil)
		}
	})
}

// Under --ui-text deny a rejection's reason keeps its field and what was
// expected, without the input it quotes; with text allowed it is whole.
func TestDenyRedactsQuotedInput(t *testing.T) {
	for _, policy := range []string{TextDeny, TextAllow} {
		r := newRig(t, policy)
		r.conversation("alpha", 3)
		data, _ := json.Marshal(map[string]any{"v": 1, "session": "alpha", "turn_id": "bad-role", "at": time.Now().UTC(),
			"speaker": "Ann", "role": "my pin is 4711", "text": "hello"})
		if _, err := r.env.JS.Publish(context.Background(), r.env.Layout.Subjects.In("alpha", events.KindTurn), data); err != nil {
			t.Fatal(err)
		}
		r.env.Eventually("the rejected turn", func() bool {
			return r.streamCount(r.env.Layout.DLQ, r.env.Layout.Subjects.DeadLetter("alpha")) == 1
		})
		var page TimelinePage
		r.get("/api/sessions/alpha/timeline?limit=1000", nil, http.StatusOK, &page)
		var reason string
		for _, it := range page.Items {
			if it.Rejected != nil {
				reason = it.Rejected.Reason
			}
		}
		body, _ := json.Marshal(page)
		switch policy {
		case TextDeny:
			if strings.Contains(string(body), "4711") || !strings.Contains(reason, "(14 characters)") || !strings.Contains(reason, "expected") {
				t.Errorf("deny: reason %q; want the quoted role replaced by its length, the expectation kept (page has the pin: %v)", reason, strings.Contains(string(body), "4711"))
			}
		case TextAllow:
			if !strings.Contains(reason, `"my pin is 4711"`) {
				t.Errorf("allow: reason %q, want the quoted role", reason)
			}
		}
	}
}
