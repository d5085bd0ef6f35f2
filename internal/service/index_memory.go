package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/reldate"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// memory is one durable fact a fold published on
// <prefix>.out.<session>.memory, as a question-aware context recalls it.
type memory struct {
	id, speaker, text, turnID string
	// supersedes is the id of the earlier memory this one replaces (a
	// later turn changed the fact): the earlier one is not recalled.
	supersedes string
	// at is when the fact was stated (the item's time), else when the
	// memories were published; published is the message's stream time.
	at, published time.Time
	terms         map[string]int32
	len           int32
}

// newMemoryFailures is the counter of memory reads that failed: the
// session's contexts are then packed with excerpts (and the memories read
// before), never refused.
func newMemoryFailures(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_memories_failures_total",
		Help: "Reads of a session's memories (the facts its folds published) that failed; its contexts were packed with excerpts instead."})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// supersededMark starts the text of a memory a later one superseded.
const supersededMark = "(superseded) "

// memoryBytes estimates a memory's footprint for the byte budget.
const memoryBytes = 160

// catchUpMemories reads the session's memory events published after the
// replay's last one, from the outbound stream, one direct get each (a
// session publishes at most one per fold). first, if not nil and from
// the replay's position, is the first get, already under way
// (prefetchMemory).
func (s *server) catchUpMemories(ctx context.Context, rp *replay, first *nextMemory) error {
	out, err := s.outStream(ctx)
	if err != nil {
		return err
	}
	subject := s.subj.Out(rp.session, events.KindMemory)
	if first != nil && first.from != rp.memNext {
		first = nil
	}
	for {
		var msg *jetstream.RawStreamMsg
		if first != nil {
			<-first.done
			msg, err = first.msg, first.err
			first = nil
		} else {
			msg, err = out.GetMsg(ctx, rp.memNext, jetstream.WithGetMsgSubject(subject))
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading memories of session %s from stream %s: %w", rp.session, s.layout.Out, err)
		}
		rp.memNext = msg.Sequence + 1
		var ev events.Memories
		if err := json.Unmarshal(msg.Data, &ev); err != nil || ev.Session != rp.session {
			continue
		}
		add := func(id, speaker, text, turnID, supersedes string, at time.Time) {
			if text == "" {
				return
			}
			if at.IsZero() {
				at = ev.At
			}
			m := memory{id: id, speaker: speaker, text: text, turnID: turnID, at: at.UTC(), published: msg.Time, terms: map[string]int32{}, supersedes: supersedes}
			s.an.each(speaker+" "+text, func(t string) {
				m.len++
				if t != "" {
					m.terms[t]++
				}
			})
			rp.mems = append(rp.mems, m)
			rp.memBytes += memoryBytes + int64(2*len(text))
		}
		if len(ev.Items) > 0 {
			for i, it := range ev.Items {
				id := it.ID
				if id == "" {
					id = fmt.Sprintf("%d.%d", ev.Version, i+1)
				}
				add(id, it.Speaker, it.Text, it.TurnID, it.Supersedes, it.At)
			}
			continue
		}
		for i, text := range ev.Memories {
			add(fmt.Sprintf("%d.%d", ev.Version, i+1), "", text, "", "", time.Time{})
		}
	}
}

// nextMemory is the first get of a memories catch-up (the session's
// memory event at or after from), started before the replay is ready
// for it so that its round trip overlaps other work.
type nextMemory struct {
	from uint64
	msg  *jetstream.RawStreamMsg
	err  error
	done chan struct{}
}

// prefetchMemory starts reading the session's memory event at or after
// from.
func (s *server) prefetchMemory(ctx context.Context, session string, from uint64) *nextMemory {
	f := &nextMemory{from: from, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		out, err := s.outStream(ctx)
		if err != nil {
			f.err = err
			return
		}
		f.msg, f.err = out.GetMsg(ctx, from, jetstream.WithGetMsgSubject(s.subj.Out(session, events.KindMemory)))
	}()
	return f
}

// outStream looks the outbound stream up once.
func (s *server) outStream(ctx context.Context) (jetstream.Stream, error) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.out != nil {
		return s.out, nil
	}
	out, err := s.js.Stream(ctx, s.layout.Out)
	if err != nil {
		return nil, fmt.Errorf("outbound stream %s: %w", s.layout.Out, err)
	}
	s.out = out
	return out, nil
}

// packMemories charges the best of the session's memories that match the
// query terms (rankMemories), at most maxRecalledMemories, best first.
func (s *server) packMemories(h *indexHandle, terms []string, ms ...*meter) []client.RecalledItem {
	var items []client.RecalledItem
	for _, it := range s.rankMemories(h, terms, false) {
		if len(items) >= maxRecalledMemories {
			break
		}
		it.Chars, it.Tokens = s.lineCost(it.Line())
		if len(items) == 0 {
			hc, ht := s.lineCost(client.MemoriesHeader)
			if !take(it.Chars+hc, it.Tokens+ht, ms...) {
				continue
			}
		} else if !take(it.Chars, it.Tokens, ms...) {
			continue
		}
		items = append(items, it)
	}
	return items
}

// rankMemories ranks the session's memories of the current epoch against
// the query terms (BM25 among them): those that match, best first, each
// with its relative times resolved against when it was stated
// (reldate.Resolve), costs not counted.
//
// With changed, a memory that a later one supersedes is ranked too, its
// text marked (supersededMark): what a person said before they changed
// it answers "what changed"; without, only the newer one answers.
func (s *server) rankMemories(h *indexHandle, terms []string, changed bool) []client.RecalledItem {
	rp := h.r
	var live []*memory
	var totalLen int64
	superseded := map[string]bool{}
	for _, m := range rp.mems {
		if m.supersedes != "" {
			superseded[m.supersedes] = true
		}
	}
	for i := range rp.mems {
		m := &rp.mems[i]
		if rp.lastReset != 0 && !m.published.After(rp.resetAt) {
			continue // published before the last reset
		}
		if superseded[m.id] && !changed {
			continue // a later turn changed the fact: the newer memory answers
		}
		live = append(live, m)
		totalLen += int64(m.len)
	}
	if len(live) == 0 {
		return nil
	}
	n := float64(len(live))
	avgLen := max(1, float64(totalLen)/n)
	type scored struct {
		m     *memory
		i     int
		score float64
	}
	var ranked []scored
	for i, m := range live {
		var score float64
		for _, t := range terms {
			f := float64(m.terms[t])
			if f == 0 {
				continue
			}
			var df float64
			for _, o := range live {
				if o.terms[t] > 0 {
					df++
				}
			}
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(m.len)/avgLen))
		}
		if score > 0 {
			ranked = append(ranked, scored{m, i, score})
		}
	}
	slices.SortFunc(ranked, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.i, a.i)) })
	items := make([]client.RecalledItem, 0, len(ranked))
	for _, r := range ranked {
		items = append(items, client.RecalledItem{Kind: client.RecalledMemory, MemoryID: r.m.id, TurnID: r.m.turnID, Speaker: r.m.speaker,
			At: r.m.at, Score: r.score, Text: reldate.Resolve(r.m.text, r.m.at)})
		if superseded[r.m.id] {
			items[len(items)-1].Text = supersededMark + items[len(items)-1].Text
		}
	}
	return items
}
