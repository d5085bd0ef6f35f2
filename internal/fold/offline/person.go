package offline

import (
	"slices"
	"strings"
)

const maxPeople = 24      // speakers whose facts are kept: the most recent
const maxPersonFacts = 12 // facts kept per speaker: the newest

// person is what was told about one speaker across folds: the newest fact per subject, with its memory's ID, so a
// changed fact supersedes it.
type person struct {
	Name  string  `json:"name"`
	Facts []pfact `json:"facts,omitempty"`
}

// pfact is one fact about a speaker, as its memory says it.
type pfact struct {
	ID   string  `json:"id"`             // the memory's ID
	Kind string  `json:"kind"`           // likes, did, plans, owns, where, is
	Slot string  `json:"slot,omitempty"` // what it is about (stemmed): a newer fact of the same kind and slot replaces it
	Text string  `json:"text"`
	At   int64   `json:"at,omitempty"`
	js   written // (codec.go)
}

// Fact kinds, by the verb that follows the speaker's name in a statement put in the third person ("Lena loves sushi",
// "Jonas will drive").
var factVerbs = []struct {
	kind   string
	verbs  []string // that open the fact
	byVerb bool     // the verb is the subject: a new home or workplace replaces the old
}{
	{"where", []string{"lives in", "lives at", "lives near", "works at", "works for", "works in", "moved to", "is from", "is moving to", "studies at"}, true},
	{"likes", []string{"likes", "loves", "prefers", "enjoys", "hates", "dislikes", "doesn't like", "is into", "is a fan of", "really likes", "really loves"}, false},
	{"plans", []string{"will", "is going to", "is gonna", "plans to", "wants to", "is planning", "hopes to", "intends to", "is thinking of", "won't"}, false},
	{"owns", []string{"has a", "has an", "has two", "owns", "bought", "got a", "got an", "just got"}, false},
	{"did", []string{"went to", "visited", "finished", "started", "tried", "made", "took", "saw", "met", "finally", "already", "just", "played", "watched", "read", "learned", "won", "lost"}, false},
	{"is", []string{"is a", "is an", "is vegetarian", "is vegan", "is allergic", "can't", "can", "is"}, false},
}

// factVerbsBy are factVerbs' kinds and verbs (their indexes) by the verb's first byte, in factVerbs' order.
var factVerbsBy = func() (by [256][][2]int) {
	for i, fv := range factVerbs {
		for j, v := range fv.verbs {
			by[v[0]] = append(by[v[0]], [2]int{i, j})
		}
	}
	return by
}()

// personFact reads a statement about its speaker ("Lena loves sushi.") as a fact: its kind and what it is about; ok
// false for anything else.
func (lx *lexicon) personFact(x *stmt) (kind, slot string, ok bool) {
	rest, cut := strings.CutPrefix(x.Text, x.Sp)
	if x.Sp == "" || !cut || !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "'s ") {
		return "", "", false
	}
	if strings.HasPrefix(rest, "'s ") { // "Jonas's car fits four": what they own
		if w, _ := nextField(rest[3:], 0); w != "" {
			return "owns", lx.get(strings.ToLower(strings.Trim(w, ".,!?"))).stem, true
		}
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	var buf [24]byte // the verbs are short and ASCII: an ASCII text is read from its start lower-cased
	low, obj := buf[:min(len(rest), len(buf))], rest
	for i := range low { // (lower, without its appends: what is not ASCII is read again below)
		low[i] = lowerASCII(rest[i])
	}
	if !isASCII(rest) {
		obj = strings.ToLower(rest)
		low = []byte(obj)
	}
	if hasPrefixBytes(low, "said") || hasPrefixBytes(low, "asked") || hasPrefixBytes(low, "thought") {
		return "", "", false // reported speech: not about the speaker
	}
	for _, at := range factVerbsBy[low[:1][0]] { // (low of no bytes reads its room's 0)
		if fv, v := factVerbs[at[0]], factVerbs[at[0]].verbs[at[1]]; hasPrefixBytes(low, v) && (len(obj) == len(v) || low[len(v)] == ' ') {
			if fv.byVerb {
				if strings.HasPrefix(v, "works") || strings.HasPrefix(v, "studies") {
					return fv.kind, "work", true
				}
				return fv.kind, "home", true
			}
			n := 1 // what one likes, owns or did: the thing
			if fv.kind == "plans" || fv.kind == "is" {
				n = 2 // a plan: what is done to what ("book cabin")
			}
			return fv.kind, lx.objectSlot(obj[len(v):], n), true
		}
	}
	return "", "", false
}

// objectSlot: the stems of the first n content words ("sushi", "book desert").
func (lx *lexicon) objectSlot(obj string, n int) string {
	var arr, out [16]string
	ts, slot := arr[:0], out[:0] // the distinct terms read so far (appendTerms), and those of them without a digit
	for f, wi := nextField(obj, 0); f != "" && len(slot) < n; f, wi = nextField(obj, wi) {
		m := len(ts)
		ts = addTerms(ts, 0, lx.field(f))
		for _, t := range ts[m:] {
			if !strings.ContainsAny(t, "0123456789") && len(slot) < n { // (a number is a value, not a subject)
				slot = append(slot, t)
			}
		}
	}
	return strings.Join(slot, " ")
}

// notePerson records fact x (memory id) under its speaker, x being of kind about slot (personFact; kind "": none), and
// returns the ID of the fact of the same kind and subject it replaces ("" for none).
func (st *state) notePerson(x *stmt, kind, slot, id, text string) (supersedes string) {
	if kind == "" {
		return ""
	}
	i := slices.IndexFunc(st.People, func(p person) bool { return p.Name == x.Sp })
	if i < 0 {
		st.People, i = append(st.People, person{Name: x.Sp}), len(st.People)
	}
	p := st.People[i]
	for j, old := range p.Facts {
		if old.Kind == kind && old.Slot == slot && (slot != "" || kind == "where") {
			if old.ID != id {
				supersedes = old.ID
			}
			p.Facts = slices.Delete(p.Facts, j, j+1)
			break
		}
	}
	p.Facts = append(p.Facts, pfact{ID: id, Kind: kind, Slot: slot, Text: clip(text, maxStmtRunes), At: x.At})[max(0, len(p.Facts)+1-maxPersonFacts):]
	// the speaker just heard from goes last; the least recent are dropped
	st.People = append(slices.Delete(st.People, i, i+1), p)
	st.People = st.People[max(0, len(st.People)-maxPeople):]
	return supersedes
}
