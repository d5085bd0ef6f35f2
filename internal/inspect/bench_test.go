package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/demo"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
)

// BenchmarkTimelineFirstPage measures what an operator waits for when they
// open a 10,000-turn session: the page's first timeline request (the last
// 200 entries), over HTTP, on a session a real processor folded 996
// times. "cold" empties the timeline cache before every request, so each
// one reads the session's ~13,000 messages from the three streams and
// derives the fold membership; "warm" is a page change on a loaded one.
//
//	go test -run '^$' -bench TimelineFirstPage -benchtime 5x ./internal/inspect
func BenchmarkTimelineFirstPage(b *testing.B) {
	r, session := longSession(b)
	url := r.http.URL + "/api/sessions/" + session + "/timeline?tail=1&limit=200"
	fetch := func(b *testing.B) TimelinePage {
		res, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(res.Body)
			b.Fatalf("status %d: %s", res.StatusCode, data)
		}
		var p TimelinePage
		if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
			b.Fatal(err)
		}
		return p
	}
	p := fetch(b)
	if p.Totals.Turns != longTurns || len(p.Items) != 200 {
		b.Fatalf("got %d turns, %d items, want %d and 200", p.Totals.Turns, len(p.Items), longTurns)
	}
	b.Logf("session: %d entries (%d turns, %d summary versions)", p.Total, p.Totals.Turns, len(p.Totals.SummaryVersions))
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			r.ins.cache.mu.Lock()
			clear(r.ins.cache.entries)
			r.ins.cache.mu.Unlock()
			fetch(b)
		}
	})
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			fetch(b)
		}
	})
}

// longTurns is the size of the long session the benchmarks open.
const longTurns = 10_000

// longSession publishes a 10,000-turn session to a rig's processor and
// waits until it has made every fold (996 with the test window).
func longSession(b *testing.B) (*rig, string) {
	r := newRig(b, TextAllow)
	const session = "long-session"
	speakers := []string{"Lena", "Jonas", "Keiko", "Tomás"}
	start := time.Now().Add(-longTurns * time.Second)
	for i := range longTurns {
		t := events.Turn{V: 1, Session: session, TurnID: fmt.Sprintf("t%05d", i), At: start.Add(time.Duration(i) * time.Second).UTC(),
			Speaker: speakers[i%len(speakers)], Role: "user",
			Text: fmt.Sprintf("message number %d: we still need to decide who brings the grill on Saturday and whether the cabin takes dogs", i)}
		data, _ := json.Marshal(t)
		m := &nats.Msg{Subject: r.env.Layout.Subjects.In(session, events.KindTurn), Data: data, Header: nats.Header{}}
		m.Header.Set(nats.MsgIdHdr, t.TurnID)
		if _, err := r.env.JS.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	<-r.env.JS.PublishAsyncComplete()
	folds := uint64(demo.ExpectedSummaries(longTurns, testWindow.Recent, testWindow.Batch))
	deadline := time.Now().Add(5 * time.Minute)
	for {
		e, err := r.env.KV.Get(context.Background(), session)
		if err == nil {
			if cp, err := state.Decode(session, e.Value()); err == nil && cp.Total == longTurns && cp.Version == folds && cp.Lease == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the processor did not make the %d folds of the session within 5 minutes", folds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r, session
}

// BenchmarkWhatIfRefold measures a what-if refold of the 10,000-turn
// session with the processor's settings: the scratch server's start,
// 10,000 publishes, 996 offline folds, and reading both sides back.
//
//	go test -run '^$' -bench WhatIfRefold -benchtime 1x ./internal/inspect
func BenchmarkWhatIfRefold(b *testing.B) {
	r, session := longSession(b)
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, r.http.URL+"/api/sessions/"+session+"/whatif", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var out WhatIfResult
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || !out.Settled || len(out.WhatIf.Summaries) != len(out.Real.Summaries) {
			b.Fatalf("status %d, settled %v, %d refolded versions against %d real: %v", res.StatusCode, out.Settled, len(out.WhatIf.Summaries), len(out.Real.Summaries), err)
		}
	}
}
