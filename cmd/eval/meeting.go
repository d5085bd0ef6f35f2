package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
)

// meeting is one development meeting (a QMSum file, see
// ../shared/data/qmsum/README.md), with its turns as the session holds
// them.
type meeting struct {
	Name  string
	File  string
	Turns []line // the non-empty turns, in order: session turn i is Turns[i]
	// index maps a file turn number to its session index: the number of
	// non-empty turns before it (an empty turn is not published, so its
	// span position is the next published turn's).
	index   []int
	Queries []query
	// Skipped counts specific queries whose spans do not parse or fall
	// outside the transcript.
	Skipped int
	// sitting is how many turns the replay says a day (-sitting; 0: the
	// whole meeting in one sitting, at its own pace). See at.
	sitting int
}

// line is one published turn.
type line struct {
	Speaker string
	Text    string
}

// String renders the turn as a prompt line, exactly as the context
// endpoint does (client.TurnLine), without the newline.
func (l line) String() string { return client.TurnLine(l.Speaker, l.Text) }

// query is a specific query with its evidence as session turn ranges.
type query struct {
	Query  string
	Answer string
	// Spans are [first, last] session indices, inclusive; a span of empty
	// turns only has last < first.
	Spans [][2]int
}

// qmsumFile is the part of a QMSum file the evaluation reads.
type qmsumFile struct {
	Transcript []struct {
		Speaker string `json:"speaker"`
		Content string `json:"content"`
	} `json:"meeting_transcripts"`
	Specific []struct {
		Query  string     `json:"query"`
		Answer string     `json:"answer"`
		Spans  [][]string `json:"relevant_text_span"`
	} `json:"specific_query_list"`
}

// loadMeetings reads every *.json of dir, in name order, keeping those
// whose name (without .json) is in only (all when only is empty).
func loadMeetings(dir string, only []string) ([]*meeting, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("-data %s: expected QMSum meeting files (*.json), found none", dir)
	}
	slices.Sort(files)
	var out []*meeting
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		m, err := readMeeting(f)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func readMeeting(path string) (*meeting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f qmsumFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: expected a QMSum meeting (meeting_transcripts, specific_query_list): %w", path, err)
	}
	m := &meeting{Name: strings.TrimSuffix(filepath.Base(path), ".json"), File: path, index: make([]int, len(f.Transcript)+1)}
	for i, t := range f.Transcript {
		m.index[i] = len(m.Turns)
		text, speaker := strings.TrimSpace(t.Content), strings.TrimSpace(t.Speaker)
		if text == "" {
			continue // the contract requires text; such a turn says nothing
		}
		if speaker == "" {
			speaker = "Unknown"
		}
		m.Turns = append(m.Turns, line{Speaker: speaker, Text: text})
	}
	m.index[len(f.Transcript)] = len(m.Turns)
	if len(m.Turns) == 0 {
		return nil, fmt.Errorf("%s: field meeting_transcripts: expected at least one turn with content", path)
	}
	for _, q := range f.Specific {
		spans, ok := m.sessionSpans(q.Spans)
		if !ok || strings.TrimSpace(q.Answer) == "" {
			m.Skipped++
			continue
		}
		m.Queries = append(m.Queries, query{Query: q.Query, Answer: q.Answer, Spans: spans})
	}
	return m, nil
}

// sessionSpans converts a query's file turn ranges ("start", "end",
// inclusive) to session indices.
func (m *meeting) sessionSpans(raw [][]string) ([][2]int, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	n := len(m.index) - 1 // file turns
	var out [][2]int
	for _, r := range raw {
		if len(r) != 2 {
			return nil, false
		}
		a, err1 := strconv.Atoi(strings.TrimSpace(r[0]))
		b, err2 := strconv.Atoi(strings.TrimSpace(r[1]))
		if err1 != nil || err2 != nil || a < 0 || b < a || a >= n {
			return nil, false
		}
		b = min(b, n-1)
		// File turns a..b are the session turns from index[a] to the last
		// published turn at or before b.
		out = append(out, [2]int{m.index[a], m.index[b+1] - 1})
	}
	return out, true
}

// paired replaces m's questions with questions asked two at a time
// (-pairs): each question with the next in the file whose evidence lies
// more than gap turns from its own, their texts and their answers joined,
// their evidence both ranges. Such a question needs evidence from two
// passages far apart, as "which cities have both been to" does in a chat
// of many days; a question with no such partner is not asked.
func (m *meeting) paired(gap int) {
	var out []query
	for i, a := range m.Queries {
		for _, b := range m.Queries[i+1:] {
			if b.evidenceFrom()-a.evidenceEnd() >= gap || a.evidenceFrom()-b.evidenceEnd() >= gap {
				out = append(out, query{Query: a.Query + " " + b.Query, Answer: a.Answer + " " + b.Answer,
					Spans: append(slices.Clone(a.Spans), b.Spans...)})
				break
			}
		}
	}
	m.Queries, m.Skipped = out, 0
}

// evidenceFrom is the index of the first published turn of q's evidence.
func (q query) evidenceFrom() int {
	from := q.Spans[0][0]
	for _, s := range q.Spans {
		from = min(from, s[0])
	}
	return from
}

// spread reports whether q's evidence runs over more than turns turns,
// from its first annotated turn to its last (in one range or several): an
// answer gathered from a long stretch of the session, or from passages
// far apart, rather than from one exchange. With -sitting N and turns >=
// N, such evidence was said on two days or more.
func (q query) spread(turns int) bool { return q.evidenceEnd()-q.evidenceFrom() > turns }

// evidenceEnd is one past the last session turn of q's evidence.
func (q query) evidenceEnd() int {
	end := 0
	for _, s := range q.Spans {
		end = max(end, s[1]+1)
	}
	return end
}

// leftWindow reports whether all of q's evidence lies before windowStart,
// the first turn the context holds verbatim: the question is about
// something the bot's prompt no longer shows word for word.
func (q query) leftWindow(windowStart int) bool { return q.evidenceEnd() <= windowStart }

// evidence renders q's evidence turns, one prompt line each.
func (m *meeting) evidence(q query) string {
	var b strings.Builder
	for _, s := range q.Spans {
		for i := s[0]; i <= s[1]; i++ {
			b.WriteString(m.Turns[i].String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// transcript renders every turn before end, one prompt line each.
func (m *meeting) transcript(end int) string { return render(m.Turns[:end]) }

// render writes turns as prompt lines, each with its newline.
func render(turns []line) string {
	var b strings.Builder
	for _, t := range turns {
		b.WriteString(t.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// truncation is plain truncation, what a bot without foldstream sends: the
// longest tail of the turns before end whose prompt lines (each charged
// with its newline, as the context endpoint charges them) fit in chars
// runes. A turn that does not fit whole ends the tail.
func (m *meeting) truncation(end, chars int) string {
	used, from := 0, end
	for from > 0 {
		c := client.LineChars(m.Turns[from-1].String())
		if used+c > chars {
			break
		}
		used += c
		from--
	}
	return render(m.Turns[from:end])
}

// runes is the length of s in characters, as the context endpoint counts.
func runes(s string) int { return utf8.RuneCountInString(s) }
