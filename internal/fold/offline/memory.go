package offline

import (
	"container/list"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/foldstream/foldstream/internal/fold"
)

// Offline memories: each fold turns the statements of its batch that carry
// a durable fact (a number, a date, a name, a plan or decision, a
// preference, something a speaker said about themselves) into memories,
// attributed and time-stamped. A statement that restates a memory of the
// session is not extracted again; one that changes it (the same speaker on
// the same subject, with other details: "$190 a night", later "$210 a
// night") supersedes it.

const (
	maxMemoriesPerFold    = 12   // the best facts of one batch
	maxFactsPerSession    = 256  // the newest facts a session's supersede checks see
	maxSessionsWithFacts  = 4096 // sessions whose facts are kept (least recently folded dropped)
	minMemoryContentWords = 3
)

// fact is a memory as the supersede and restate checks see it, with what
// they compare computed once.
type fact struct {
	mem   fold.Memory
	toks  tokSet              // the statement's content tokens
	subj  []string            // subjectOf(toks.toks)
	subjS tokSet              // newTokSet(subj): for sameSubjectSets
	slots map[string][]string // numSlots of the text
}

// factStore keeps, per session, the facts extracted by earlier folds, so
// that a later fold can tell a restated fact from a changed one. It is
// bounded (sessions and facts per session) and safe for concurrent use. It
// is process memory: after a restart, a changed fact's supersedes is found
// only against the facts extracted since.
type factStore struct {
	mu    sync.Mutex
	lru   *list.List // of *sessionFacts, most recently used first
	bySes map[string]*list.Element
}

type sessionFacts struct {
	session string
	facts   []*fact // (pointers: growing the slice copies no fact)
}

func newFactStore() *factStore {
	return &factStore{lru: list.New(), bySes: map[string]*list.Element{}}
}

// memories extracts the facts of the batch's units for session, records
// them and returns them: restated facts left out, changed ones with
// Supersedes set.
func (s *Summarizer) memories(session string, req fold.Request, units []*unit, who names, sc *scratch) []fold.Memory {
	n := 0
	for _, u := range units {
		if u.kind == unitSpeech && isFact(u) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	cands := take(sc.facts, n) // (the store keeps copies)
	for _, u := range units {
		if u.kind != unitSpeech || !isFact(u) {
			continue
		}
		text := u.text[0]
		f := fact{mem: fold.Memory{Speaker: u.speaker, Text: text}, toks: u.set, subj: u.subject()}
		f.subjS = newTokSet(f.subj)
		if hasDigit(text) { // (numSlots of words without a digit is nil)
			var warr [64]string
			f.slots = numSlots(appendFields(warr[:0], text))
		}
		if u.turn >= 0 && u.turn < len(req.Turns) {
			f.mem.TurnID, f.mem.At = req.Turns[u.turn].TurnID, req.Turns[u.turn].At
		}
		f.mem.ID = memoryID(f.mem)
		cands = append(cands, f)
	}
	sc.facts = cands
	if len(cands) > maxMemoriesPerFold {
		cands = cands[len(cands)-maxMemoriesPerFold:] // the newest
	}
	if len(cands) == 0 {
		return nil
	}
	return s.facts.add(session, cands)
}

// isFact reports whether a statement holds a durable fact.
func isFact(u *unit) bool {
	t := u.sp.t
	if t.question || t.injection || t.content < minMemoryContentWords {
		return false
	}
	return t.numbers > 0 || t.dates > 0 || t.preference || t.strongDecision || t.decision ||
		(t.commit && t.entities > 0) || (t.self && (t.entities > 0 || t.content >= minMemoryContentWords))
}

// memoryID is stable for a fact's speaker and text (case and spacing
// aside), so that the same fact extracted again gets the same ID.
func memoryID(m fold.Memory) string {
	h := uint64(fnvOffset64)
	add := func(s string) { // FNV-1a (hash/fnv's New64a) of s
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * fnvPrime64
		}
	}
	var buf [lowerBufLen]byte
	write := func(w string) {
		if b, ok := lowerASCII(&buf, w); ok {
			for _, c := range b {
				h = (h ^ uint64(c)) * fnvPrime64
			}
		} else {
			add(strings.ToLower(w))
		}
	}
	write(m.Speaker)
	add("\x00")
	var arr [64]string
	words := appendFields(arr[:0], strings.TrimRight(m.Text, ". "))
	for i, w := range words {
		if i > 0 {
			add(" ")
		}
		write(w)
	}
	var out [17]byte
	out[0] = 'm'
	return string(strconv.AppendUint(out[:1], h, 16))
}

// The parameters of 64-bit FNV-1a, as hash/fnv has them.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// changes reports whether newer restates (same) or changes (changed) the
// older fact of the same speaker.
func changes(older, newer *fact) (same, changed bool) {
	if !strings.EqualFold(older.mem.Speaker, newer.mem.Speaker) {
		return false, false
	}
	if nearDupSets(&older.toks, &newer.toks) {
		return true, false
	}
	return false, sameSubjectSets(&older.subjS, &newer.subjS) || slotsChanged(older.slots, newer.slots)
}

// numSlots maps each number of the sentence whose fields are words to the
// content words next to it, its slots ("$190 a night" → night; "port
// 8443" → port): articles and "per" are skipped, punctuation ends the
// search, and stop words are no slot.
func numSlots(words []string) map[string][]string {
	var out map[string][]string
	slot := func(w string) string {
		c := strings.ToLower(core(w))
		if len(c) < 3 || hasDigit(c) || !isAllLetters(c) || lexicon.get(c)&lxStop != 0 {
			return ""
		}
		return c
	}
	for i, w := range words {
		c := core(w)
		if !hasDigit(c) {
			continue
		}
		v := strings.TrimLeft(c, "$€£~")
		if out == nil {
			out = map[string][]string{}
		}
		if i > 0 && !prevEndsSentence(words[i-1]) && !strings.HasSuffix(words[i-1], ",") {
			if k := slot(words[i-1]); k != "" {
				out[k] = append(out[k], v)
			}
		}
		if c == w || strings.HasPrefix(w, "$") && strings.HasSuffix(w, c) { // no punctuation after it
			j := i + 1
			for j < len(words)-1 && (lowerEq(words[j], "a") || lowerEq(words[j], "an") || lowerEq(words[j], "per") || lowerEq(words[j], "the")) {
				j++
			}
			if j < len(words) {
				if k := slot(words[j]); k != "" {
					out[k] = append(out[k], v)
				}
			}
		}
	}
	return out
}

// slotsChanged reports whether a sentence whose numSlots are n gives a
// number a slot of o (an older sentence's) holds another value in ("$190
// a night", later "$210 a night").
func slotsChanged(o, n map[string][]string) bool {
	for k, nv := range n {
		ov, ok := o[k]
		if !ok {
			continue
		}
		for _, x := range nv {
			if !slices.Contains(ov, x) {
				return true
			}
		}
	}
	return false
}

// subjectOf is what a fact with the (sorted) token set toks is about: its
// tokens without numbers and calendar words, still sorted.
func subjectOf(toks []string) []string {
	for i, t := range toks {
		if isSubjectTok(t) {
			continue
		}
		// (most sets have no number: they are their own subject)
		out := make([]string, i, len(toks)-1)
		copy(out, toks[:i])
		for _, t := range toks[i+1:] {
			if isSubjectTok(t) {
				out = append(out, t)
			}
		}
		return out
	}
	return toks[:len(toks):len(toks)]
}

// sameSubject reports whether two facts' subjects (subjectOf) are one:
// at least two tokens in common, and most of the smaller one's. One merge
// pass: both are sorted.
func sameSubject(a, b []string) bool {
	// need is the least common count that makes them one subject: stop as
	// soon as it is out of reach.
	need := max(2, int(math.Ceil(0.6*float64(min(len(a), len(b))))))
	common := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		if common+min(len(a)-i, len(b)-j) < need {
			return false
		}
		switch c := strings.Compare(a[i], b[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			common++
			i++
			j++
		}
	}
	return common >= need
}

// sameSubjectSets is sameSubject(a.toks, b.toks). A token of a whose bit
// is not in b's signature is not in b, so counting the others bounds the
// common tokens from above: most pairs of facts fail on that bound alone.
func sameSubjectSets(a, b *tokSet) bool {
	if len(a.toks) > len(b.toks) {
		a, b = b, a // the smaller set gives the tighter bound
	}
	bound := 0
	for _, bit := range a.bits {
		bound += int(b.sig >> bit & 1)
	}
	if bound < max(2, int(math.Ceil(0.6*float64(len(a.toks))))) {
		return false // (sameSubject's need)
	}
	return sameSubject(a.toks, b.toks)
}

func isSubjectTok(t string) bool {
	return lexicon.get(t)&(lxNumber|lxCalendar) == 0 && !hasDigit(t) // (tokens are lowercase)
}

// add records cands (in order) for session and returns the memories to
// publish: new facts, and changed facts with Supersedes set.
func (fs *factStore) add(session string, cands []fact) []fold.Memory {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var sf *sessionFacts
	if e, ok := fs.bySes[session]; ok {
		fs.lru.MoveToFront(e)
		sf = e.Value.(*sessionFacts)
	} else {
		sf = &sessionFacts{session: session}
		fs.bySes[session] = fs.lru.PushFront(sf)
		if fs.lru.Len() > maxSessionsWithFacts {
			last := fs.lru.Back()
			fs.lru.Remove(last)
			delete(fs.bySes, last.Value.(*sessionFacts).session)
		}
	}
	var out []fold.Memory
	for i := range cands {
		c := &cands[i]
		restated := false
		for k := len(sf.facts) - 1; k >= 0; k-- {
			same, changed := changes(sf.facts[k], c)
			if same {
				restated = true
				break
			}
			if changed {
				c.mem.Supersedes = sf.facts[k].mem.ID
				sf.facts = slices.Delete(sf.facts, k, k+1) // the newer answers from now on
				break
			}
		}
		if restated {
			continue
		}
		// (a fact changed again later in this batch finds this one, and
		// supersedes it in the same event)
		// (kept: not the batch's shared slices)
		kept := new(fact)
		*kept = *c
		kept.toks.toks, kept.toks.bits = slices.Clone(c.toks.toks), slices.Clone(c.toks.bits)
		kept.subj = slices.Clone(c.subj)
		kept.subjS.toks = kept.subj // (its bits are its own)
		sf.facts = append(sf.facts, kept)
		if out == nil {
			out = make([]fold.Memory, 0, len(cands)-i)
		}
		out = append(out, c.mem)
	}
	if n := len(sf.facts) - maxFactsPerSession; n > 0 {
		sf.facts = slices.Delete(sf.facts, 0, n)
	}
	return out
}
