package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// one reads the session's ~14,000 messages from the three streams and
// derives the fold membership; "warm" is a page change on a loaded one.
//
//	go test -run '^$' -bench TimelineFirstPage -benchtime 5x ./internal/inspect
func BenchmarkTimelineFirstPage(b *testing.B) {
	const turns = 10_000
	r := newRig(b, TextAllow)
	const session = "long-session"
	speakers := []string{"Lena", "Jonas", "Keiko", "Tomás"}
	start := time.Now().Add(-turns * time.Second)
	for i := range turns {
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
	folds := uint64(demo.ExpectedSummaries(turns, testWindow.Recent, testWindow.Batch))
	deadline := time.Now().Add(5 * time.Minute)
	for {
		e, err := r.env.KV.Get(context.Background(), session)
		if err == nil {
			if cp, err := state.Decode(session, e.Value()); err == nil && cp.Total == turns && cp.Version == folds && cp.Lease == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the processor did not make the %d folds of the session within 5 minutes", folds)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	if p.Totals.Turns != turns || len(p.Items) != 200 {
		b.Fatalf("got %d turns, %d items, want %d and 200", p.Totals.Turns, len(p.Items), turns)
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
