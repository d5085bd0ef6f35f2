package offline

import (
	"slices"
	"strconv"
	"strings"
)

// prevSentence is what a fold derives from one sentence of the previous
// summary. It depends only on the sentence, the participants' names and
// whether the session is an agent session, so it is computed once and
// shared (read-only) by later folds: in a rolling session most sentences of
// the previous summary were already in the one before.
type prevSentence struct {
	v         [3]string // full, light, hard
	n         [3]int    // rune lengths of v
	score     float64   // importance, before weighing by age
	key       string    // tool runs: caller, tool and argument
	run       []string  // toolRunRe submatches, nil when not a tool run
	toks      tokSet    // tokenSet(v[0], who)
	bumps     []topicBump
	speaker   string      // the participant the sentence opens with ("" for none)
	subj      []string    // subjectOf(toks.toks)
	buckets   []uint16    // appendBuckets(nil, toks.toks)
	topicKeys []string    // topicKeys(its words), for the period lines
	phrases   []phraseRun // its topic phrases, for the first period line
}

// topicBump is one topic mention of a sentence, as scanTopics reports it.
type topicBump struct {
	topic  string
	double bool // a file path: counts twice
}

// analyzePrev computes the prevSentence of st. It works on a copy of st, so
// that what it keeps (substrings, in the cache) does not pin the whole
// previous summary st is part of.
func analyzePrev(st string, who names, agent bool) *prevSentence {
	st = strings.Clone(st)
	ps := &prevSentence{}
	var arr [64]string
	words := appendFields(arr[:0], st) // for every pass below
	var iarr [32]word
	infos := appendWords(iarr[:0], words)
	scanTopics(infos, who, agent, topicSink{rec: &ps.bumps})
	t := analyzeInfos(st, infos, who)
	// Score it as its statement was scored when new: the speaker's name
	// that opens it is no entity of the statement, and it is about the
	// speaker only when it is no reported speech ("Bob keeps dying", not
	// "Bob said the comp is broken").
	ps.speaker = who.prefixOf(st)
	if ps.speaker != "" {
		if t.entities > 0 {
			t.entities--
		}
		rest := st[len(ps.speaker):]
		t.self = !strings.HasPrefix(rest, " said") && !strings.HasPrefix(rest, " asked") &&
			!strings.HasPrefix(rest, " suggested") && !strings.HasPrefix(rest, " offered")
	}
	sc := scoreTraits(t, agent)
	switch m := matchToolRun(st); {
	case m != nil:
		ps.run = m
		sc = 1.2 // an old tool run is the least valuable detail
		if m[4] == "failed" {
			sc += 1.0
		}
		if !strings.Contains(m[3], ", ") {
			ps.key = m[1] + "\x00" + m[2] + "\x00" + m[3]
		}
	case strings.Contains(st, " asked") && !t.question && !t.request:
		sc += 2.5 // a request rendered as "X asked: …"
	}
	if strings.Contains(st, " agreed") || strings.Contains(st, " said yes") {
		sc += 1.5
	}
	if strings.Contains(st, "screen:") || strings.HasPrefix(st, "Screen note") {
		sc += 1.0
	}
	if agent && strings.HasPrefix(st, "User ") {
		sc += 1.5
	}
	ps.score = sc
	l1 := condenseLightIn(st, words)
	ps.v = [3]string{st, l1, condenseMain(l1)}
	for i, v := range ps.v {
		ps.n[i] = runeLen(v)
	}
	ps.toks = newTokSet(tokenSetOfInfos(infos, who))
	ps.subj = subjectOf(ps.toks.toks)
	ps.buckets = appendBuckets(nil, ps.toks.toks)
	if !agent {
		ps.topicKeys = topicKeys(words)
		var iarr [64]word
		ps.phrases = appendPhraseRuns(nil, words, appendWords(iarr[:0], words), who)
	}
	return ps
}

// sentKey identifies a prevSentence: the sentence and the context it was
// analysed in (see sentContext).
type sentKey struct{ text, ctx string }

// sentContext is the part of a fold that analyzePrev depends on besides the
// sentence: agent or voice, and the participants' names (lowercased,
// sorted, each length-prefixed).
func sentContext(who names, agent bool) string {
	keys := make([]string, 0, len(who.m))
	for k := range who.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	if agent {
		b.WriteByte('a')
	} else {
		b.WriteByte('v')
	}
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// sentCacheSize bounds the cache: it holds between sentCacheSize and twice
// as many sentences (under 1 KiB each), enough for the previous summaries
// of a few hundred sessions folding concurrently; beyond that, folds still
// give the same results, only without the saving.
const sentCacheSize = 2048

// sentCache is a bounded cache of prevSentence values (genCache: two
// generations; it only saves work).
type sentCache struct {
	genCache[*prevSentence]
}

func newSentCache(size int) *sentCache {
	c := &sentCache{}
	c.init(size)
	return c
}

// prevSentences returns the prevSentence of every sentence, from the cache
// when it has them.
func (c *sentCache) prevSentences(sents []string, who names, agent bool) []*prevSentence {
	if len(sents) == 0 {
		return nil
	}
	ctx := sentContext(who, agent)
	out := make([]*prevSentence, len(sents))
	missing := false
	c.mu.Lock()
	for i, st := range sents {
		ps, ok := c.getLocked(sentKey{st, ctx})
		out[i] = ps
		missing = missing || !ok
	}
	c.mu.Unlock()
	if !missing {
		return out
	}
	var added []int
	for i, st := range sents {
		if out[i] == nil {
			out[i] = analyzePrev(st, who, agent)
			added = append(added, i)
		}
	}
	c.mu.Lock()
	for _, i := range added {
		c.addLocked(sentKey{out[i].v[0], ctx}, out[i]) // (v[0]: the copy of sents[i])
	}
	c.mu.Unlock()
	return out
}
