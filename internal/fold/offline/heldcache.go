package offline

import (
	"slices"
)

// heldCacheSize bounds heldCache like sentCacheSize bounds sentCache: it
// holds between heldCacheSize and twice as many texts (a summary's period
// lines, under 2 KiB with their buckets), enough for a few hundred
// sessions folding concurrently.
const heldCacheSize = 1024

// heldCache is a bounded cache of the coverage buckets of a summary's
// period lines (the held tokens fit weighs the statements against). A
// session's period lines stay the same over most of its folds (only a new
// period changes them), and their words would be split, classed, sorted and
// hashed again every fold. Two generations, as in sentCache; it only saves
// work: a miss recomputes the same value, so results never depend on what
// it holds.
type heldCache struct {
	genCache[[]uint16]
}

func newHeldCache(size int) *heldCache {
	c := &heldCache{}
	c.init(size)
	return c
}

// buckets returns appendBuckets(nil, tokenSet(text, who)), from the cache
// when it has it. The slice is shared: callers only read it.
func (c *heldCache) buckets(text string, who names, agent bool) []uint16 {
	k := sentKey{text, sentContext(who, agent)}
	if b, ok := c.get(k); ok {
		return b
	}
	var ptArr [256]string
	var pfArr [256]string
	var pbArr [256]uint16
	b := slices.Clone(appendBuckets(pbArr[:0], appendTokenSet(ptArr[:0], appendFields(pfArr[:0], text), who)))
	c.add(k, b)
	return b
}
