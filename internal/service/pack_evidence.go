package service

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/reldate"
	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/foldstream/foldstream/internal/speech"
	"github.com/foldstream/foldstream/internal/state"
)

// What makes an excerpt worth its characters (the picker's choices beyond
// the ranking): a turn that only greets or names someone is no evidence,
// a turn that says again what a chosen one said is not shown twice, nor
// one the reply shows as a memory; a long turn is trimmed to the
// sentences that carry the match.
const (
	// A matching turn longer than trimChars and than 1/trimShare of the
	// budget is trimmed to its sentences that hold a query or feedback
	// term: the larger the budget, the more of a turn is worth its
	// characters (a turn within half of the budget is weighed whole
	// against the rest, and cut only when it does not fit).
	trimChars = 240
	trimShare = 2
	// nearDuplicate is the share of common content terms (Jaccard) above
	// which a match repeats a chosen one.
	nearDuplicate = 0.8
	// diversityWindow is how many of the next best matches the picker
	// chooses among; dayDecay lowers a match's score for each match
	// already chosen on its day (picker.next).
	diversityWindow = 10
	dayDecay        = 0.85
	// Evidence comes in stretches: a question's answer is usually a run
	// of turns (a question, its replies, the exchange that follows), so
	// a turn near the matches chosen so far is more likely evidence than
	// one as relevant by its words alone elsewhere in the session. The
	// value packing raises a match's value by nearBoost for each chosen
	// match at most nearReach turns away from it and said within nearSpan
	// of it (picker.nearMatches): a run of turns is one sitting, so in a
	// chat of many days the turns that end one day's conversation are not
	// the stretch of those that open the next.
	nearReach = 15
	nearBoost = 2
	nearSpan  = 3 * time.Hour
	// summaryDominates: a whole summary that takes more than this share
	// of the budget (percent) is weighed against the matches it leaves
	// out (summaryOutweighed).
	summaryDominates = 25
	// trimMark stands for the sentences a trimmed excerpt leaves out.
	trimMark = "…"
)

// greetingWords are what a turn that only greets, thanks or takes leave
// says, besides names.
var greetingWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`hi hey hello hiya yo morning afternoon evening night good great nice cool thanks
		thank thx bye goodbye cya later see soon welcome dear lol haha hehe wow awesome sure right alright fine`) {
		m[w] = true
	}
	return m
}()

// docTerms are a turn's content terms: its text's, without names.
type docTerms struct {
	// terms are the terms in the order the text first says them, each
	// followed by a 0 byte (the view's own string when the text names
	// no one), n how many; set the same as a set, made at its first use
	// (lookup: a turn holds a few dozen terms, and a question's few are
	// found by a scan).
	terms string
	n     int
	set   map[string]bool
	// named are the names among its text's terms.
	named []string
	// substantive: a term that is neither a greeting word nor a name.
	substantive bool
}

// terms is doc d's content terms, computed once per picker.
func (p *picker) docTerms(d int) *docTerms {
	if dt, ok := p.content[d]; ok {
		return dt
	}
	view := p.x.view(d)
	names := p.names()
	dt := &docTerms{terms: view.terms, n: strings.Count(view.terms, "\x00")}
	if holdsName(view.terms, names) {
		var b strings.Builder
		b.Grow(len(view.terms)) // at most the view's terms
		dt.n = 0
		view.eachTerm(func(t string) {
			if names[t] {
				dt.named = append(dt.named, t)
				return
			}
			b.WriteString(t)
			b.WriteByte(0)
			dt.n++
		})
		dt.terms = b.String()
	}
	for s := dt.terms; s != ""; {
		var t string
		if t, s = nextTerm(s); !greetingStems[t] {
			dt.substantive = true
			break
		}
	}
	p.content[d] = dt
	return dt
}

// holdsName reports whether terms (each followed by a 0 byte) hold one
// of names: a scan for each of a few names, else a lookup of each term.
func holdsName(terms string, names map[string]bool) bool {
	if len(names) <= 8 {
		for n := range names {
			if hasTerm(terms, n) {
				return true
			}
		}
		return false
	}
	for s := terms; s != ""; {
		var t string
		if t, s = nextTerm(s); names[t] {
			return true
		}
	}
	return false
}

// nextTerm splits terms (each followed by a 0 byte) after the first.
func nextTerm(terms string) (term, rest string) {
	i := strings.IndexByte(terms, 0)
	return terms[:i], terms[i+1:]
}

// hasTerm reports whether t is one of terms (each followed by a 0 byte).
func hasTerm(terms, t string) bool {
	if t == "" {
		return false
	}
	for off := 0; ; {
		i := strings.Index(terms[off:], t)
		if i < 0 {
			return false
		}
		i += off
		if end := i + len(t); (i == 0 || terms[i-1] == 0) && end < len(terms) && terms[end] == 0 {
			return true
		}
		off = i + 1
	}
}

// has reports whether t is one of the terms.
func (dt *docTerms) has(t string) bool { return hasTerm(dt.terms, t) }

// lookup is the terms as a set.
func (dt *docTerms) lookup() map[string]bool {
	if dt.set == nil {
		dt.set = make(map[string]bool, dt.n)
		for s := dt.terms; s != ""; {
			var t string
			t, s = nextTerm(s)
			dt.set[t] = true
		}
	}
	return dt.set
}

// greetingStems are greetingWords as index terms.
var greetingStems = func() map[string]bool {
	an := newAnalyzer()
	m := map[string]bool{}
	for w := range greetingWords {
		an.each(w, func(t string) {
			if t != "" {
				m[t] = true
			}
		})
	}
	return m
}()

// names are the index terms of the speakers' names among the best
// matches: the people of the conversation, as a question names them.
func (p *picker) names() map[string]bool {
	if p.nameTerms != nil {
		return p.nameTerms
	}
	p.nameTerms = map[string]bool{}
	seen := map[string]bool{}
	for _, h := range p.hits[:min(len(p.hits), 200)] {
		sp := p.x.speaker(h.doc)
		if seen[sp] {
			continue
		}
		seen[sp] = true
		p.s.an.each(sp, func(t string) {
			if t != "" {
				p.nameTerms[t] = true
			}
		})
	}
	return p.nameTerms
}

// evidence reports whether doc d may be recalled as a match: not a turn
// the reply shows as a memory, not one that only greets or names
// someone, nor a turn of speech that says nothing once cleaned; one that
// matches the question on more than a name when the question asks about
// more than a person (by its words or its feedback terms; with hybrid
// ranking, a turn near it by meaning too); and not a near-duplicate of a
// chosen match.
func (p *picker) evidence(d int) bool {
	return p.relevant(d) && !p.repeats(p.docTerms(d))
}

// relevant is evidence without the near-duplicate check: what the value
// packing asks (it weighs repetition by novelty instead).
func (p *picker) relevant(d int) bool {
	if p.isShown(d) {
		return false
	}
	dt := p.docTerms(d)
	if !dt.substantive || p.saysNothing(d) {
		return false
	}
	names := p.names()
	topical, matched := false, false
	for _, t := range p.terms {
		if names[t] {
			continue
		}
		topical = true
		if dt.has(t) {
			matched = true
			break
		}
	}
	if topical && !matched && p.byNamed(d) {
		matched = true // said by a person the question names
	}
	if topical && !matched && !p.hybrid {
		for _, t := range p.feedback {
			if dt.has(t) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	return true
}

// repeats reports whether a turn with content terms dt is a
// near-duplicate of a chosen match or of a memory shown.
func (p *picker) repeats(dt *docTerms) bool {
	for _, c := range p.order {
		if it := p.chosen[c]; it.Neighbour {
			continue
		}
		if jaccard(dt.lookup(), p.docTerms(c).lookup()) >= nearDuplicate {
			return true
		}
	}
	for _, m := range p.shownTerms {
		if jaccard(dt.lookup(), m) >= nearDuplicate {
			return true
		}
	}
	return false
}

// isShown reports whether doc d's turn is shown as a memory (show).
func (p *picker) isShown(d int) bool {
	return len(p.shown) > 0 && p.shown[p.x.turn(d).TurnID]
}

// asks reports whether doc d's text as an excerpt shows it ends with a
// question mark. Cleaning only removes, so a turn with no "?" in it
// cannot: its display text is not made to find that out.
func (p *picker) asks(d int) bool {
	if v, ok := p.x.viewed(d); ok {
		return strings.HasSuffix(v.text, "?")
	}
	if strings.IndexByte(p.x.turn(d).Text, '?') < 0 {
		return false
	}
	return strings.HasSuffix(p.text(d), "?")
}

// show records a memory the reply shows: its turn and what repeats it
// are not recalled as excerpts.
func (p *picker) show(m client.RecalledItem) {
	if m.TurnID != "" {
		p.shown[m.TurnID] = true
	}
	set := map[string]bool{}
	names := p.names()
	p.s.an.each(m.Text, func(t string) {
		if t != "" && !names[t] {
			set[t] = true
		}
	})
	p.shownTerms = append(p.shownTerms, set)
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	in := 0
	for t := range a {
		if b[t] {
			in++
		}
	}
	return float64(in) / float64(len(a)+len(b)-in)
}

// text is doc d's text as an excerpt shows it: a turn of speech without
// what its transcript carries besides the words (speech.Clean), so that
// the value packing weighs and charges what the reply shows; a tool's
// turn, or one with nothing left, as it is. Cleaned once per index
// (turnIndex.view). For a question that asks when (asksWhen), its
// relative dates are resolved against when it was said, as a memory's are
// (reldate: "yesterday" said on 8 May 2023 reads "yesterday (7 May
// 2023)"): the question asks when it happened, not when it was told;
// for another question the dates would only cost room. Resolved once per
// picker.
func (p *picker) text(d int) string {
	text := p.x.view(d).text
	if !p.when || !reldate.MayHave(text) {
		return text
	}
	if r, ok := p.resolved[d]; ok {
		return r
	}
	r := reldate.Resolve(text, p.x.turn(d).At)
	if p.resolved == nil {
		p.resolved = map[int]string{}
	}
	p.resolved[d] = r
	return r
}

// saysNothing reports whether doc d is a turn of speech without a word
// once cleaned ("{vocalsound}", "Um."): never a neighbour, as it makes
// nothing readable.
func (p *picker) saysNothing(d int) bool { return p.x.view(d).wordless }

// displayText is turn t's text as a recalled line shows it (picker.text),
// and whether it is a turn of speech with nothing left once cleaned
// (shown as it is then).
func displayText(t *events.Turn) (string, bool) {
	if t.Tool != "" || strings.HasPrefix(t.Kind, "tool") || t.Role == "tool" {
		return t.Text, false
	}
	if c := speech.Clean(t.Text); c != "" {
		return c, false
	}
	return t.Text, true
}

// trim is doc d's text as an excerpt: a turn longer than trimChars is cut
// to its sentences that hold a query or feedback term, in order, with
// trimMark where sentences were left out (never inside a word). A turn
// where no sentence matches, or nearly all do, is kept whole.
func (p *picker) trim(d int) (string, bool) {
	text := p.text(d)
	if runes(text) <= max(trimChars, p.budget/trimShare) {
		return text, false
	}
	return p.cut(d)
}

// cut is doc d's text cut to its sentences that hold a query or feedback
// term (trim, whatever its length): a match too long for the room left
// may still fit as the sentences that carry it.
func (p *picker) cut(d int) (string, bool) {
	text := p.text(d)
	want := p.trimWeights()
	sents := sentences(text)
	keep := make([]bool, len(sents))
	kept, keptChars := 0, 0
	for i, s := range sents {
		p.s.an.each(s, func(t string) {
			if want[t] > 0 {
				keep[i] = true
			}
		})
		if keep[i] {
			kept++
			keptChars += len(s)
		}
	}
	if kept == 0 || keptChars*5 >= len(text)*4 {
		return text, false
	}
	var b strings.Builder
	gap := false
	for i, s := range sents {
		if !keep[i] {
			gap = true
			continue
		}
		if gap || b.Len() > 0 {
			if gap {
				if b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(trimMark)
			}
			b.WriteByte(' ')
		}
		b.WriteString(s)
		gap = false
	}
	if gap {
		b.WriteString(" " + trimMark)
	}
	return b.String(), true
}

// trimWeights are the terms an excerpt is trimmed around, with their
// weight: a query term 1, a term only the ranking added (feedback) 0.5.
// Made once per picker.
func (p *picker) trimWeights() map[string]float64 {
	if p.weights == nil {
		p.weights = make(map[string]float64, len(p.terms)+len(p.feedback))
		for _, t := range p.feedback {
			p.weights[t] = 0.5
		}
		for _, t := range p.terms {
			p.weights[t] = 1
		}
	}
	return p.weights
}

// best is doc d's text cut to its one sentence that holds the most of
// the query's terms (a feedback term counts half), the shorter of equals,
// with trimMark for the sentences left out; false when the text has one
// sentence or none holds a term.
func (p *picker) best(d int) (string, bool) {
	want := p.trimWeights()
	sents := sentences(p.text(d))
	if len(sents) < 2 {
		return "", false
	}
	at, bestValue, bestLen := -1, 0.0, 0
	for i, s := range sents {
		seen := map[string]bool{}
		var v float64
		p.s.an.each(s, func(t string) {
			if w := want[t]; w > 0 && !seen[t] {
				seen[t] = true
				v += w
			}
		})
		if n := len(s); v > 0 && (v > bestValue || v == bestValue && n < bestLen) {
			at, bestValue, bestLen = i, v, n
		}
	}
	if at < 0 {
		return "", false
	}
	text := sents[at]
	if at > 0 {
		text = trimMark + " " + text
	}
	if at < len(sents)-1 {
		text += " " + trimMark
	}
	return text, true
}

// tailText is text cut to its last sentences that fit in limit
// characters after trimMark and a space; when its last sentence alone
// does not fit, that sentence's last words that do (never a cut word).
// False when text fits whole or not even its last word fits.
func tailText(text string, limit int) (string, bool) {
	if utf8.RuneCountInString(text) <= limit {
		return text, false
	}
	// keep is where the last parts that fit after trimMark, each after a
	// space, start (len(parts): none fits).
	keep := func(parts []string) int {
		n, from := utf8.RuneCountInString(trimMark), len(parts)
		for ; from > 0; from-- {
			if n += 1 + utf8.RuneCountInString(parts[from-1]); n > limit {
				break
			}
		}
		return from
	}
	sents := sentences(text)
	if from := keep(sents); from < len(sents) {
		return trimMark + " " + strings.Join(sents[from:], " "), true
	}
	words := strings.Fields(text)
	if from := keep(words); from < len(words) {
		return trimMark + " " + strings.Join(words[from:], " "), true
	}
	return text, false
}

// sentences splits text into its sentences (sentence.Split: at a
// sentence end and a space, not after an abbreviation, an initial or
// inside a number, and at line breaks), each without its surrounding
// spaces.
func sentences(text string) []string { return sentence.Split(text) }

// asksWhen reports whether query asks when something happened: its first
// word is "when" (or "when's"), or it asks "how long", or "what" or "which" followed by
// date, day, week, month or year.
func asksWhen(query string) bool {
	ws := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	for i, w := range ws {
		if i == 0 && (w == "when" || w == "when's") {
			return true
		}
		if i+1 >= len(ws) {
			break
		}
		switch next := ws[i+1]; {
		case w == "how" && next == "long":
			return true
		case w == "what" || w == "which":
			switch strings.TrimSuffix(next, "s") {
			case "date", "day", "week", "month", "year":
				return true
			}
		}
	}
	return false
}

// day is t's day (UTC), for diversity.
func day(t time.Time) int64 { return t.UTC().Unix() / 86400 }

// packSummarySections packs the summary under a budget: whole when it
// costs at most summaryShare of it, else the sentences of it that match
// the query (pk's terms; the rarest per character first, as the session's
// turns count rarity) within that share, in their order, marked trimmed;
// dropped when none matches or fits.
func (s *server) packSummarySections(cp *state.Session, out *client.Context, pk *picker, total *meter) {
	limit := meter{maxChars: percent(total.maxChars, summaryShare), maxTokens: percent(total.maxTokens, summaryShare)}
	layer := &client.SummaryLayer{Version: cp.Version, CoveredThroughTurn: cp.CoveredThrough}
	set := func(text string) bool {
		layer.Summary, layer.Text = text, client.SummaryPrefix+text
		layer.Chars, layer.Tokens = s.lineCost(layer.Text)
		return limit.fits(layer.Chars, layer.Tokens) && take(layer.Chars, layer.Tokens, total)
	}
	var idf map[string]float64
	if pk != nil && pk.n > pk.lo {
		docs := float64(pk.n - pk.lo)
		idf = map[string]float64{}
		for _, t := range pk.terms {
			_, df := pk.x.postingsIn(t, pk.lo, pk.n)
			idf[t] = math.Log(1 + (docs-df+0.5)/(df+0.5))
		}
	}
	if (idf == nil || !s.summaryOutweighed(cp.Summary, pk, idf, total)) && set(cp.Summary) {
		out.Summary = layer
		return
	}
	out.SummaryDropped = true
	if idf == nil {
		return
	}
	sents := sentences(cp.Summary)
	type cand struct {
		i     int
		value float64
	}
	var cands []cand
	for i, sent := range sents {
		seen := map[string]bool{}
		var v float64
		s.an.each(sent, func(t string) {
			if w, ok := idf[t]; ok && !seen[t] {
				seen[t] = true
				v += w
			}
		})
		if v > 0 {
			cands = append(cands, cand{i, v / float64(utf8.RuneCountInString(sent)+1)})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.value, a.value) })
	keep := make([]bool, len(sents))
	render := func() string {
		var kept []string
		for i, k := range keep {
			if k {
				kept = append(kept, sents[i])
			}
		}
		return strings.Join(kept, " ")
	}
	chars := client.LineChars(client.SummaryPrefix) - 1
	any := false
	for _, c := range cands {
		n := utf8.RuneCountInString(sents[c.i]) + 1
		if limit.maxChars != 0 && chars+n > limit.maxChars {
			continue
		}
		keep[c.i] = true
		chars += n
		any = true
	}
	for any {
		if set(render()) {
			layer.Trimmed = true
			out.Summary, out.SummaryDropped = layer, false
			return
		}
		// Over the token limit (or the budget): drop the least valuable.
		any = false
		for k := len(cands) - 1; k >= 0; k-- {
			if keep[cands[k].i] {
				keep[cands[k].i] = false
				break
			}
		}
		for _, k := range keep {
			any = any || k
		}
	}
}

// summaryOutweighed reports whether the summary, taking more than
// summaryDominates of the budget, holds less of the question per
// character than the best matches would in its room: the question's
// terms (by idf) that each has, counted once, over its characters.
func (s *server) summaryOutweighed(summary string, pk *picker, idf map[string]float64, total *meter) bool {
	chars := utf8.RuneCountInString(summary)
	if total.maxChars == 0 || chars*100 <= total.maxChars*summaryDominates {
		return false
	}
	value := func(seen map[string]bool, text string) (v float64) {
		s.an.each(text, func(t string) {
			if w, ok := idf[t]; ok && !seen[t] {
				seen[t] = true
				v += w
			}
		})
		return v
	}
	sv := value(map[string]bool{}, summary) / float64(chars)
	seen := map[string]bool{}
	var ev float64
	used := 0
	for _, h := range pk.hits {
		if used >= chars {
			break
		}
		text := pk.text(h.doc)
		ev += value(seen, text)
		used += utf8.RuneCountInString(text)
	}
	return used > 0 && ev/float64(max(used, chars)) > sv
}

// nearMatches is how many of the chosen matches (not neighbours) are at
// most nearReach turns from doc d and said within nearSpan of it (a turn
// without a time is near any turn in reach). p.order is sorted: a binary
// search and a pass over the chosen turns in reach.
func (p *picker) nearMatches(d int) int {
	at, _ := slices.BinarySearch(p.order, d-nearReach)
	n := 0
	var when time.Time
	for _, c := range p.order[at:] {
		if c > d+nearReach {
			break
		}
		it := p.chosen[c]
		if it.Neighbour {
			continue
		}
		if when.IsZero() {
			when = p.x.turn(d).At
		}
		if !sameSitting(when, it.At) {
			continue
		}
		n++
	}
	return n
}

// sameSitting reports whether turns said at a and b may be one run of
// conversation: at most nearSpan apart, or either without a time.
func sameSitting(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return true
	}
	return a.Sub(b).Abs() <= nearSpan
}
