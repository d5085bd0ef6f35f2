package main

import "github.com/foldstream/foldstream/client"

// The baselines a bot author writes without foldstream, each rendered the
// way such a builder would show it to a model: "Speaker: text" lines in
// transcript order, with a date line before the first turn of each day
// ("[23 Nov 2026]"), every line charged with its newline.

// dayLayout is how a baseline's date line gives the day: as the
// context service labels a day of excerpts.
const dayLayout = client.RecallTimeLayout

// dayLine is the date line before the first turn of turn i's day.
func (m *meeting) dayLine(i int) string { return "[" + m.at(i).UTC().Format(dayLayout) + "]" }

func (m *meeting) sameDay(i, j int) bool {
	a, b := m.at(i).UTC(), m.at(j).UTC()
	return a.YearDay() == b.YearDay() && a.Year() == b.Year()
}

// dated renders turns idx (increasing) of m with a date line per day.
func (m *meeting) dated(idx []int) string {
	var out []byte
	for k, i := range idx {
		if k == 0 || !m.sameDay(idx[k-1], i) {
			out = append(out, m.dayLine(i)...)
			out = append(out, '\n')
		}
		out = append(out, m.Turns[i].String()...)
		out = append(out, '\n')
	}
	return string(out)
}

// transcriptDated is every turn before end, dated: the measure's ceiling.
func (m *meeting) transcriptDated(end int) string {
	idx := make([]int, end)
	for i := range idx {
		idx[i] = i
	}
	return m.dated(idx)
}

// truncationDated is dated truncation: the longest tail of the turns
// before end that fits in chars runes with its date lines. A turn that
// does not fit whole ends the tail.
func (m *meeting) truncationDated(end, chars int) string {
	used, from := 0, end
	for from > 0 {
		i := from - 1
		c := client.LineChars(m.Turns[i].String())
		if from == end || !m.sameDay(i, from) {
			c += client.LineChars(m.dayLine(i))
		}
		if used+c > chars {
			break
		}
		used += c
		from--
	}
	idx := make([]int, 0, end-from)
	for i := from; i < end; i++ {
		idx = append(idx, i)
	}
	return m.dated(idx)
}

// plainRetrieval is what a bot author writes in fifty lines with any
// search library: BM25 (stop words dropped, light stemming: the
// reference ranker of rank.go) over every turn before end, best turns
// first while they fit in chars runes with their date lines (a turn that
// does not fit is skipped, a smaller one may still), rendered in
// transcript order with a date line per day. r indexes m.Turns[:end].
func (m *meeting) plainRetrieval(r *ranker, query string, chars int) string {
	chosen := map[int]bool{}
	days := map[string]bool{}
	used := 0
	for _, h := range r.rank(query) {
		i := h.from
		c := client.LineChars(m.Turns[i].String())
		day := m.dayLine(i)
		if !days[day] {
			c += client.LineChars(day)
		}
		if used+c > chars {
			continue
		}
		used += c
		chosen[i] = true
		days[day] = true
	}
	idx := make([]int, 0, len(chosen))
	for i := range m.Turns {
		if chosen[i] {
			idx = append(idx, i)
		}
	}
	return m.dated(idx)
}
