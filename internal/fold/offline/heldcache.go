package offline

import "slices"

// heldCacheSize bounds heldCache like sentCacheSize bounds sentCache: it
// holds between heldCacheSize and twice as many period lines (under 1 KiB
// each with their tokens), enough for a few hundred sessions folding
// concurrently.
const heldCacheSize = 1024

// heldCache is a bounded cache of the token sets of a summary's period
// lines, line by line: fit holds the tokens of all the lines as covered.
// Most lines of a fold were lines of the fold before (a new period, or two
// merged, changes one or two), and their words would be split, classed,
// sorted and hashed again every fold. Two generations, as in sentCache; it
// only saves work: a miss recomputes the same value, so results never
// depend on what it holds.
type heldCache struct {
	genCache[[]string]
}

func newHeldCache(size int) *heldCache {
	c := &heldCache{}
	c.init(size)
	return c
}

// appendBuckets appends appendBuckets(nil, tokenSet(text, who)) to dst,
// where text is the lines joined by spaces: the token set of the text is
// the union of the lines' sets (a token is one word's), which come from the
// cache when it has them.
func (c *heldCache) appendBuckets(dst []uint16, lines []string, who names, agent bool) []uint16 {
	ctx := sentContext(who, agent)
	var toksArr [256]string
	toks := toksArr[:0]
	for _, l := range lines {
		k := sentKey{l, ctx}
		set, ok := c.get(k)
		if !ok {
			var fArr [64]string
			var sArr [64]string
			// (l is a line rendered by this fold, not part of a summary:
			// the key and the tokens that are parts of it pin no more)
			set = slices.Clone(appendTokenSet(sArr[:0], appendFields(fArr[:0], l), who))
			c.add(k, set)
		}
		toks = append(toks, set...)
	}
	return appendBuckets(dst, sortedSet(toks, 0))
}
