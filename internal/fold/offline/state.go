package offline

import (
	"bytes"
	"slices"
	"strings"
	"time"
)

// stateVersion is the version of the state this package writes. A state of version 1 (facts with their full hash beside
// the ID) or 2 (every word count written, ":1" too) reads as one of this version; a state of a later version is not
// read (the session goes on from its prose).
const stateVersion = 3

// Bounds of the state. maxStateBytes is the most its encoding takes: a state over it loses its least valuable
// statements first.
const (
	maxStateBytes   = 16 << 10
	maxNames        = 32  // participants named; the rest are counted
	maxOpen         = 80  // statements of the current period
	maxPeriodKept   = 6   // statements a closed period keeps
	maxFacts        = 64  // memories remembered for supersession
	maxFoldMemories = 24  // memories one fold returns: the weightiest
	maxStmtRunes    = 320 // one statement's text
)

// state is what the summarizer knows after a fold. It travels to the next fold as Result.State (JSON, so that replay
// and the inspector can show it) and the summary is rendered from it alone.
type state struct {
	V int `json:"v"`
	// Sum is the hash of the summary rendered from this state: a previous summary that does not match it (the summary
	// came from elsewhere) is read as prose instead.
	Sum   uint64 `json:"sum"`
	Agent bool   `json:"agent,omitempty"`
	// Names are the participants in order of first appearance; Others counts those beyond maxNames.
	Names  []string `json:"names,omitempty"`
	Others int      `json:"others,omitempty"`
	// Periods are the closed stretches of the conversation, oldest first.
	Periods []period `json:"periods,omitempty"`
	// Open are the statements since the last closed period, oldest first.
	Open []stmt `json:"open,omitempty"`
	// Facts are the memories returned so far (newest last), so that a restated fact is not returned again and a changed
	// one supersedes.
	Facts []fact `json:"facts,omitempty"`
	// Topics are what the opening sentence of a summary read as prose named, until the statements name their own.
	Topics []string `json:"topics,omitempty"`
	// Small: every turn so far was small talk.
	Small bool `json:"small,omitempty"`
	// People are the facts about each speaker, consolidated across folds (person.go), the speaker heard from most
	// recently last.
	People []person `json:"people,omitempty"`
	// Voc is how often each word of the conversation was said (counts.go).
	Voc string `json:"voc,omitempty"`

	said        string      // the summary Sum is the hash of, when held (load need not hash it again)
	voc         *wordCounts // Voc, read
	counted     *knownRead  // Voc as the fold that wrote it counted it
	src         []byte      // Request.PreviousState: this state as its encoding number srcSeq wrote it (seq: encodings so far)
	srcSeq, seq int
	sc          *scratch // the fold's room, where Voc is read into
	gathered    []phrase // the phrases topics gathered last (render.go), of statements with the phrases gatheredOf
	gatheredOf  []string // (Ph; a tool run's: none)
	people      []string // the words of the participants' names peopleOf, stemmed (topics)
	peopleOf    []string
}

// period is a closed stretch of the conversation: when, who spoke most, what about, and its best statements.
type period struct {
	From   int64    `json:"from,omitempty"` // unix seconds; 0 = not known
	To     int64    `json:"to,omitempty"`
	Names  []string `json:"names,omitempty"`
	Topics []string `json:"topics,omitempty"`
	Stmts  []stmt   `json:"stmts,omitempty"`
}

// Statement kinds.
const (
	kSaid     = iota // a statement
	kQuestion        // an open question
	kNote            // a screen note
	kTool            // a tool run
	kAsk             // an instruction of the user (agent sessions)
)

// stmt is one statement as it is rendered, with what ranking and supersession need.
type stmt struct {
	Sp   string  `json:"sp,omitempty"`
	At   int64   `json:"at,omitempty"` // unix seconds
	Text string  `json:"text"`
	W    float64 `json:"w"`
	K    int     `json:"k,omitempty"`
	// Terms are the statement's content words, stemmed, space-separated: for novelty, topics and supersession without
	// analysing it again.
	Terms string `json:"terms,omitempty"`
	// Key identifies what a tool run or a fact with numbers is about: a newer statement with the same key replaces it.
	Key string `json:"key,omitempty"`
	// Ph are the statement's topic phrases, "text=key" joined by ";" (the key: the phrase's words stemmed), found once
	// when it is read.
	Ph string `json:"ph,omitempty"`
	// Batch is set on the statements of the fold that wrote the state.
	Batch bool      `json:"batch,omitempty"`
	Own   string    `json:"-"` // the sentence in the speaker's words (a memory's text); not kept
	ids   []int32   // Terms by their numbers in this fold, once found (wordCounts.termIDs)
	read  *textRead // what rendering reads in Text, once it changed
	js    written   // where an encoding of its state wrote it (codec.go)
}

// fact is a memory returned earlier; its ID is the hash of its speaker and lower-cased text (memories), so the same
// memory has the same ID.
type fact struct {
	ID  string `json:"id"`
	Sp  string `json:"sp,omitempty"`
	Key string `json:"key,omitempty"`
	Num string `json:"num,omitempty"` // its numbers, space-separated
	js  written
}

// hashString is hash/fnv's 64-bit FNV-1a of s, without a copy of s; fnvAdd(hashString(a), b) == hashString(a + b).
func hashString(s string) uint64 { return fnvAdd(14695981039346656037, s) }

// fnvAddLower is fnvAdd(h, strings.ToLower(s)), without the copy of an ASCII s.
func fnvAddLower(h uint64, s string) uint64 {
	if !isASCII(s) {
		s = strings.ToLower(s) // (then lowerASCII changes none of its bytes)
	}
	const prime, ones = 1099511628211, 0x0101010101010101
	for ; len(s) >= 8; s = s[8:] { // (eight bytes a turn lower-cased at once: c < 0x80 is a capital where c+0x3f has the high bit, c+0x25 not)
		x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 | uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		x |= ((x&^(0x80*ones) + 0x3f*ones) &^ (x&^(0x80*ones) + 0x25*ones) &^ x & (0x80 * ones)) >> 2
		h = ((((h^x&0xff)*prime^x>>8&0xff)*prime^x>>16&0xff)*prime ^ x>>24&0xff) * prime
		h = ((((h^x>>32&0xff)*prime^x>>40&0xff)*prime^x>>48&0xff)*prime ^ x>>56) * prime
	}
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(lowerASCII(s[i]))) * prime
	}
	return h
}

func fnvAdd(h uint64, s string) uint64 {
	const prime = 1099511628211
	for ; len(s) >= 16; s = s[16:] { // (sixteen bytes a turn: a summary is hashed every fold)
		h = ((((h^uint64(s[0]))*prime^uint64(s[1]))*prime^uint64(s[2]))*prime ^ uint64(s[3])) * prime
		h = ((((h^uint64(s[4]))*prime^uint64(s[5]))*prime^uint64(s[6]))*prime ^ uint64(s[7])) * prime
		h = ((((h^uint64(s[8]))*prime^uint64(s[9]))*prime^uint64(s[10]))*prime ^ uint64(s[11])) * prime
		h = ((((h^uint64(s[12]))*prime^uint64(s[13]))*prime^uint64(s[14]))*prime ^ uint64(s[15])) * prime
	}
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime
	}
	return h
}

// keep writes st (encode) and holds it for the bytes written, unless they read back otherwise (encode's lossy); of this
// fold, the next reads as from a decoded state no scratch, statements' own words or terms.
func (s *Summarizer) keep(st *state) []byte {
	data, lossy := st.encode()
	if lossy {
		return data
	}
	if st.voc != nil && st.voc.back != nil && st.voc.back.s == st.Voc {
		st.counted = st.voc.back
	}
	st.voc, st.sc, st.src = nil, nil, nil
	forget := func(ss []stmt) {
		for i := range ss {
			ss[i].Own, ss[i].ids = "", nil
		}
	}
	for i := range st.Periods {
		forget(st.Periods[i].Stmts)
	}
	forget(st.Open)
	s.held.Put(data, st)
	return data
}

// encode writes st within maxStateBytes (lossy as appendJSON's), dropping its least valuable parts while it is over.
func (st *state) encode() (_ []byte, lossy bool) {
	st.V = stateVersion
	for {
		b, lossy, err := st.appendJSON(st.scratch().out.w[:0])
		if err != nil {
			return nil, false // (only unencodable floats; W is always finite)
		}
		if len(b) <= maxStateBytes || !st.shed() {
			return bytes.Clone(b), lossy
		}
	}
}

// shed drops about a quarter of what the state holds beyond its skeleton; false when nothing is left to drop.
func (st *state) shed() bool {
	did := false
	if n := len(st.Facts); n > 4 {
		st.Facts, did = slices.Delete(st.Facts, 0, n/4), true
	}
	if n := len(st.Open); n > 2 {
		st.Open, did = dropWeakest(st.Open, n/4+1), true
	}
	for i := range st.Periods {
		if n := len(st.Periods[i].Stmts); n > 1 {
			st.Periods[i].Stmts, did = dropWeakest(st.Periods[i].Stmts, n/4+1), true
		}
	}
	if n := len(st.People); !did && n > 2 {
		st.People, did = slices.Delete(st.People, 0, n/4+1), true
	}
	if !did && st.counts().shrink() {
		st.Voc, did = st.voc.String(), true
	}
	if !did && len(st.Periods) > 1 {
		st.Periods, did = st.Periods[1:], true
	}
	if !did && len(st.Names) > 4 {
		st.Others, st.Names, did = st.Others+len(st.Names)-4, st.Names[:4], true
	}
	if did {
		return true
	}
	for i := range st.Open { // (when nothing else was dropped)
		if x := &st.Open[i]; runeLen(x.Text) > 80 {
			x.Text, did = clip(x.Text, 80), true
		}
	}
	return did
}

// anyOf reports whether f holds for one of xs, each given by its address (statements and facts are large to copy).
func anyOf[T any](xs []T, f func(*T) bool) bool {
	for i := range xs {
		if f(&xs[i]) {
			return true
		}
	}
	return false
}

// dropWeakest removes the n statements of lowest weight, keeping order.
func dropWeakest(ss []stmt, n int) []stmt {
	if n >= len(ss) {
		return ss[:0]
	}
	ws := make([]float64, len(ss))
	for i, s := range ss {
		ws[i] = s.W
	}
	slices.Sort(ws)
	cut := ws[n-1]
	return slices.DeleteFunc(ss, func(s stmt) bool {
		drop := s.W <= cut && n > 0
		n -= b2i(drop)
		return drop
	})
}

// scratch is the fold's room.
func (st *state) scratch() *scratch {
	if st.sc == nil {
		st.sc = new(scratch)
	}
	return st.sc
}

// addName records a participant.
func (st *state) addName(n string) {
	switch {
	case n == "" || slices.Contains(st.Names, n):
	case len(st.Names) >= maxNames:
		st.Others++
	default:
		st.Names = append(st.Names, n)
	}
}

// ---- summaries written before the state existed ----

// fromProse rebuilds a state from a summary this backend (or another) wrote: the opening sentence gives the
// participants, every other sentence becomes a statement of the current period, attributed when it starts with a known
// name. It runs once per session: the state goes on from there.
func fromProse(prose string, lx *lexicon) *state {
	st := &state{V: stateVersion}
	sents := splitSentences(sanitize(prose, 64<<10))
	if len(sents) > maxOpen {
		sents = sents[len(sents)-maxOpen:]
	}
	for i, s := range sents {
		if i == 0 {
			if names, ok := leadNames(s); ok {
				for _, n := range names {
					st.addName(n)
				}
				for _, sep := range []string{" are talking about ", " is talking about ", " are working on ", " is working on "} {
					if _, ts, ok := strings.Cut(strings.TrimSuffix(s, "."), sep); ok {
						for _, t := range strings.Split(strings.ReplaceAll(ts, " and ", ", "), ", ") {
							if t = strings.TrimSpace(t); t != "" && len(st.Topics) < maxTopics {
								st.Topics = append(st.Topics, t)
							}
						}
					}
				}
				st.Small = strings.HasSuffix(s, "small talk.")
				continue
			}
		}
		s = clip(s, maxStmtRunes)
		sp := ""
		if j := strings.IndexByte(s, ' '); j > 0 && slices.Contains(st.Names, s[:j]) {
			sp = s[:j]
		}
		terms := lx.termString(s)
		k := kSaid
		switch {
		case sp != "" && strings.HasPrefix(s[len(sp):], " asked") && strings.HasSuffix(s, "?"):
			k = kQuestion
		case sp != "" && strings.HasPrefix(s[len(sp):], " ran "):
			k = kTool
		}
		x := stmt{Sp: sp, Text: s, Terms: terms, K: k, W: weigh(s, strings.Count(terms, " ")+1, statWords(s))}
		x.Ph = lx.phrases(statementBody(x), st.Names)
		st.Open = append(st.Open, x)
	}
	return st
}

// leadNames reads the participants of an opening sentence ("Alice, Bob and Carol are talking about …", "… are working
// on …", "… exchanged small talk.", "Alice made small talk.").
func leadNames(s string) ([]string, bool) {
	for _, sep := range []string{" are talking about ", " are working on ", " are in the session", " is in the session",
		" exchanged small talk", " made small talk", " is talking about ", " is working on "} {
		if j := strings.Index(s, sep); j > 0 {
			var out []string
			for _, n := range strings.Split(s[:j], ", ") {
				for _, m := range strings.Split(n, " and ") {
					if m = strings.TrimSpace(m); m != "" && !strings.HasSuffix(m, "others") && !strings.HasSuffix(m, "other") {
						out = append(out, m)
					}
				}
			}
			return out, len(out) > 0
		}
	}
	return nil, false
}

func unixOf(t time.Time) int64 { return t.Unix() * int64(b2i(!t.IsZero())) }
