package offline

import "slices"

// heldCacheSize bounds heldCache like sentCacheSize bounds sentCache: each
// of its two maps holds between heldCacheSize and twice as many entries
// (period texts with their buckets, period lines with their tokens, under
// 2 KiB each), enough for a few hundred sessions folding concurrently.
const heldCacheSize = 1024

// heldCache is a bounded cache of the coverage buckets of a summary's
// period lines (the tokens fit holds as covered). A session's period lines
// often stay the same from one fold to the next (texts: the buckets of the
// whole text); when a new period starts, or two merge, most of its lines
// are still lines of the fold before (lines: each line's token set).
// Without it their words would be split, classed, sorted and hashed again
// every fold. Two generations each, as in sentCache; it only saves work: a
// miss recomputes the same value, so results never depend on what it
// holds.
type heldCache struct {
	texts genCache[[]uint16]
	lines genCache[[]string]
}

func newHeldCache(size int) *heldCache {
	c := &heldCache{}
	c.texts.init(size)
	c.lines.cur, c.lines.size = map[sentKey][]string{}, size // (grown as lines come: a Summarizer starts small)
	return c
}

// appendBuckets appends appendBuckets(nil, tokenSet(text, who)) to dst;
// text is the lines joined by spaces. The token set of the text is the
// union of the lines' sets (a token is one word's).
func (c *heldCache) appendBuckets(dst []uint16, text string, lines []string, who names, agent bool) []uint16 {
	ctx := sentContext(who, agent)
	if b, ok := c.texts.get(sentKey{text, ctx}); ok {
		return append(dst, b...)
	}
	var toksArr [256]string
	toks := toksArr[:0]
	for _, l := range lines {
		k := sentKey{l, ctx}
		set, ok := c.lines.get(k)
		if !ok {
			var fArr [64]string
			var sArr [64]string
			// (l is a line rendered by this fold, not part of a summary:
			// the key and the tokens that are parts of it pin no more)
			set = slices.Clone(appendTokenSet(sArr[:0], appendFields(fArr[:0], l), who))
			c.lines.add(k, set)
		}
		toks = append(toks, set...)
	}
	mark := len(dst)
	dst = appendBuckets(dst, sortedSet(toks, 0))
	c.texts.add(sentKey{text, ctx}, slices.Clone(dst[mark:]))
	return dst
}
