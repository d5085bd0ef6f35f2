package offline

import "sync"

// scratch is the working memory of one fold: the slices that hold its
// words, units, token sets and items. Later folds reuse their capacity
// (scratchPool), so that a fold allocates little more than what it
// returns. Nothing a fold returns, caches or stores points into it: what
// the fact store keeps is copied (factStore.add).
type scratch struct {
	words   []string           // the fields of the batch's sentences (extract)
	infos   []word             // the words of the units' sentences (extract)
	units   []unit             // the last block of the unit arena
	said    []saidSentence     // the batch's sentences of speech (extract)
	facts   []fact             // the batch's candidate facts (memories)
	toks    []string           // the units' token sets (tokenizeUnits)
	bits    []uint8            // their signature bits
	buckets []uint16           // their coverage buckets
	items   []item             // the items (assemble)
	ptrs    []*item            // the items in order
	sal     map[string]float64 // earlierCounts of the previous summary
	phrases *phraseCounter     // the batch's topic phrases
	first   *phraseCounter     // the previous statements' topic phrases (the first period line)
}

// phraseCounter returns sc's phrase counter, empty (put resets it;
// newPhraseCounter(words) the first time). A fold asks once.
func (sc *scratch) phraseCounter(words int) *phraseCounter {
	if sc.phrases == nil {
		sc.phrases = newPhraseCounter(words)
	}
	return sc.phrases
}

// firstCounter is phraseCounter for the first period line: the topic
// phrases of the previous summary's statements.
func (sc *scratch) firstCounter(words int) *phraseCounter {
	if sc.first == nil {
		sc.first = newPhraseCounter(words)
	}
	return sc.first
}

// maxScratch bounds the capacity of a slice that is kept for later folds:
// a rare huge batch does not pin its memory.
const maxScratch = 1 << 14

// scratchPool hands out scratches. It is safe for concurrent use (one
// scratch per fold in progress).
type scratchPool struct{ p sync.Pool }

func (sp *scratchPool) get() *scratch {
	if sc, ok := sp.p.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

// put clears what sc's slices hold (the fold set each to the part it
// used) and keeps it for a later fold. (An element beyond that part, left
// by a slice that was cut back, is overwritten by a later fold or dropped
// with the pool at the next garbage collection.)
func (sp *scratchPool) put(sc *scratch) {
	sc.words = reuse(sc.words)
	sc.infos = reuse(sc.infos)
	sc.units = reuse(sc.units)
	sc.said = reuse(sc.said)
	sc.facts = reuse(sc.facts)
	sc.toks = reuse(sc.toks)
	sc.bits = reuse(sc.bits)
	sc.buckets = reuse(sc.buckets)
	sc.items = reuse(sc.items)
	sc.ptrs = reuse(sc.ptrs)
	if len(sc.sal) > maxScratch {
		sc.sal = nil
	}
	clear(sc.sal)
	sc.phrases = reuseCounter(sc.phrases)
	sc.first = reuseCounter(sc.first)
	sp.p.Put(sc)
}

// reuseCounter returns pc reset, or nil when it is too large to keep.
func reuseCounter(pc *phraseCounter) *phraseCounter {
	if pc == nil || len(pc.list) > maxScratch || len(pc.surf) > maxScratch {
		return nil
	}
	pc.reset()
	return pc
}

// reuse returns s cleared and emptied, or nil when it is too large to
// keep.
func reuse[T any](s []T) []T {
	if cap(s) > maxScratch {
		return nil
	}
	clear(s)
	return s[:0]
}

// take returns buf emptied when it can hold n elements, else a new slice
// of capacity n.
func take[T any](buf []T, n int) []T {
	if cap(buf) >= n {
		return buf[:0]
	}
	return make([]T, 0, n)
}
