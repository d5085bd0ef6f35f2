package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestStem(t *testing.T) {
	for in, want := range map[string]string{
		"decided": "decid", "decide": "decid", "batteries": "battery", "battery": "battery",
		"designing": "design", "stopped": "stop", "prices": "pric", "price": "pric",
		"class": "class", "bus": "bus", "this": "this", "190": "190", "cat": "cat",
	} {
		if got := stem(in); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRankerFindsTheTurnAndItsPassage(t *testing.T) {
	m := meetingFrom(t, []string{"hello all", "what battery do we use?", "a kinetic one", "okay", "the case is yellow", "fine"})
	r := newRanker(m.Turns, 5, rankOpts{stop: true, stem: true})
	hits := r.rank("Which batteries?")
	if len(hits) != 1 || hits[0].from != 1 || hits[0].to != 1 {
		t.Fatalf("hits = %+v, want turn 1 only", hits)
	}
	// Passages of 2: turns 0-1 and 1-2 hold the word; turn 5 is beyond end.
	p := newRanker(m.Turns, 5, rankOpts{stop: true, stem: true, passage: 2})
	hits = p.rank("battery")
	if len(hits) != 2 || hits[0].from+hits[1].from != 1 {
		t.Fatalf("passage hits = %+v, want [0,1] and [1,2]", hits)
	}
	if got := p.rank("fine"); len(got) != 0 {
		t.Errorf("a turn at or after end was ranked: %+v", got)
	}
}

func TestPackStaysInBudgetInOrder(t *testing.T) {
	m, err := readMeeting(filepath.Join("testdata", "tiny", "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	cursor := 60
	r := newRanker(m.Turns, cursor, rankOpts{stop: true, stem: true})
	hits := r.rank("battery case cost")
	if len(hits) < 3 {
		t.Fatalf("hits = %+v", hits)
	}
	summary := strings.Repeat("s", 300)
	for _, o := range []packOpts{
		{budget: 400, summary: true, neighbours: 1},
		{budget: 1500, summary: true, neighbours: 1, windowMin: 500},
		{budget: 1500, neighbours: 2, prevOnly: true},
		{budget: 1500, excerpts: 1},
		{budget: 3000, summary: true, excerpts: -1},
		{budget: 100000, summary: true},
	} {
		got := pack(m, summary, cursor, hits, o)
		if n := runes(got); n > o.budget {
			t.Errorf("%+v: %d chars over the budget", o, n)
		}
		// Excerpts are in transcript order, labelled, and before the window.
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		last := ""
		inExcerpts := false
		for _, l := range lines {
			switch {
			case l == excerptsHeader:
				inExcerpts = true
			case inExcerpts && strings.HasPrefix(l, "["):
				if l[:7] < last {
					t.Errorf("%+v: excerpt %q before %q", o, l, last)
				}
				last = l[:7]
			default:
				inExcerpts = false
			}
		}
		hasExcerpts := strings.Contains(got, excerptsHeader)
		if o.excerpts < 0 && hasExcerpts || o.budget >= 1500 && o.excerpts >= 0 && !hasExcerpts {
			t.Errorf("%+v: excerpts present %v:\n%s", o, hasExcerpts, got)
		}
		if o.excerpts == 1 && strings.Count(got, "\n[") != 1 {
			t.Errorf("%+v: want one excerpt turn:\n%s", o, got)
		}
	}
	// With room for everything, the window reaches back to turn 0 after the
	// summary and the excerpts.
	all := pack(m, summary, cursor, hits, packOpts{budget: 100000, summary: true})
	if !strings.HasSuffix(all, m.transcript(len(m.Turns))) || !strings.HasPrefix(all, "Earlier in this session: sss") {
		t.Errorf("unbounded pack is not summary + excerpts + whole transcript")
	}
}
