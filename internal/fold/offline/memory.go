package offline

import (
	"slices"
	"strconv"
	"strings"

	"github.com/foldstream/foldstream/internal/fold"
)

// memories are the batch's statements that hold a durable fact: what someone said about themselves (likes, plans, where
// they live or work, what they did or own), and statements with numbers, dates or decisions, each in its speaker's own
// words with relative dates resolved (a memory's line names its speaker: "Lena: I live in Berlin."). A fact returned
// before (the same text) is not returned again; one that changes what its speaker likes, did, plans, owns or where they
// live or work (person.go), or the numbers of that speaker's earlier fact about the same thing, supersedes it.
func (st *state) memories(req fold.Request, b batch) []fold.Memory {
	sc := st.scratch()
	cands, kinds := sc.sents[:0], sc.kinds[:0] // (the turns' sentences are read); each one's personFact
	for i := range b.stmts {
		x := &b.stmts[i]
		if x.K != kSaid && x.K != kAsk || x.Sp == "" || x.Own == "" || strings.IndexByte(x.Terms, ' ') < 0 || runeLen(x.Own) > maxStmtRunes {
			continue // not a speaker's own words, too little to remember, or too long
		}
		kind, slot, about := st.lex().personFact(x)
		if !isFactStmt(x, about) || !about && !fieldsAtLeast(x.Text, 5) {
			continue // no fact, or too short to stand alone
		}
		cands, kinds = append(cands, *x), append(kinds, [2]string{kind, slot})
	}
	if len(cands) > maxFoldMemories { // (dropWeakest keeps no index: the facts of those left are read again)
		cands, kinds = dropWeakest(cands, len(cands)-maxFoldMemories), kinds[:maxFoldMemories]
		for i := range cands {
			kinds[i][0], kinds[i][1], _ = st.lex().personFact(&cands[i])
		}
	}
	sc.sents, sc.kinds = cands, kinds
	out := make([]fold.Memory, 0, len(cands))
	for ci := range cands {
		x := &cands[ci]
		text := upperFirst(x.Own)
		id := string(strconv.AppendUint(append(make([]byte, 0, 16), 'm'), fnvAddLower(fnvAdd(hashString(x.Sp), "\x00"), text)&0xffffffffffff, 16))
		if anyOf(st.Facts, func(f *fact) bool { return f.ID == id }) {
			continue // returned before (or in this fold)
		}
		m := fold.Memory{ID: id, Speaker: x.Sp, Text: text, At: x.at()}
		for i := range req.Turns {
			if t := &req.Turns[i]; b.sps[i] == x.Sp && unixOf(t.At) == x.At {
				m.TurnID, m.At = t.TurnID, t.At
				break
			}
		}
		m.Supersedes = st.notePerson(x, kinds[ci][0], kinds[ci][1], m.ID, m.Text)
		for i := len(st.Facts) - 1; m.Supersedes == "" && i >= max(0, len(st.Facts)-maxFacts) && x.Key != "" && !strings.HasPrefix(x.Key, "tool "); i-- {
			if st.Facts[i].Sp == x.Sp && changedSlots(st.Facts[i].Num, x.Key) > 0 {
				m.Supersedes = st.Facts[i].ID
				break
			}
		}
		m.Supersedes = strings.Clone(m.Supersedes) // (an ID read from the state is part of all its text)
		st.Facts = append(st.Facts, fact{ID: m.ID, Sp: x.Sp, Num: x.Key})
		out = append(out, m)
	}
	st.Facts = st.Facts[max(0, len(st.Facts)-maxFacts):]
	return out
}

var factWordList = []string{"i'm ", "i am ", "my ", "i have ", "i've ", "i like", "i love", "i hate", "i prefer", "i live",
	"i work", "i moved", "i'll ", "i will ", "i booked", "i bought", "i own", "i went", "i started", "i plan",
	"i'm going", "we decided", "we agreed", "we'll ", "let's ", "i can ", "i can't", "i don't"}

// isFactStmt reports a statement worth remembering (about: a fact about its speaker, personFact): one with numbers or a
// resolved date, or one in whose words its speaker says what they are, have, like, did, plan or decided (factWordList).
func isFactStmt(x *stmt, about bool) bool { // (x has two terms or more: memories asks no other)
	return x.Key != "" || about || strings.Contains(x.Own, " (") && strings.Contains(x.Own, "20") || factWords.in(x.Own)
}

var factWords = newKeywords(factWordList...)

// changedSlots counts the slots of older ("night=$190") that newer ("night=$210") gives another value.
func changedSlots(older, newer string) int {
	n := 0
	for o, wi := nextField(older, 0); o != ""; o, wi = nextField(older, wi) {
		os, ov, _ := strings.Cut(o, "=")
		for x, xi := nextField(newer, 0); x != ""; x, xi = nextField(newer, xi) {
			ns, nv, _ := strings.Cut(x, "=")
			if os == ns && ov != nv && strings.Trim(ov, "$") != strings.Trim(nv, "$") {
				n++
				break
			}
		}
	}
	return n
}

// supersede removes from the summary's statements those that the batch's statements replace: an older run of the
// same tool command, a fact of the same speaker whose numbers changed (not another's), a repeat of the same statement.
func (st *state) supersede(newer []stmt) {
	drop := func(old stmt) bool {
		tool := old.Key != "" && strings.HasPrefix(old.Key, "tool ")
		fact := old.Key != "" && !tool && old.K != kAsk
		return anyOf(newer, func(n *stmt) bool { // (of the same speaker: most of what a fact said has changed, or the same terms)
			return tool && old.Key == n.Key || old.Sp == n.Sp && (fact && n.Key != "" && 2*changedSlots(old.Key, n.Key) > strings.Count(old.Key, "=") ||
				old.Terms != "" && old.Terms == n.Terms)
		})
	}
	st.Open = slices.DeleteFunc(st.Open, drop)
	for i := range st.Periods {
		st.Periods[i].Stmts = slices.DeleteFunc(st.Periods[i].Stmts, drop)
	}
}
