package offline

import (
	"slices"
	"strings"
)

// periodCacheSize bounds periodCache as heldCacheSize bounds heldCache.
const periodCacheSize = 1024

// periodCache is a bounded cache of parsePeriod's results: a summary's
// period lines come back in the next fold's previous summary, mostly
// unchanged, and would be parsed again every fold. Two generations, as in
// sentCache; it only saves work: a miss parses the line as before, and a
// hit hands out a copy (a fold changes its periods).
type periodCache struct {
	genCache[*period] // nil: no period line
}

func newPeriodCache(size int) *periodCache {
	c := &periodCache{}
	c.init(size)
	return c
}

// parse is parsePeriod(s, who); ctx is sentContext of who (computed by the
// caller once per fold), so that a line is parsed once per set of names.
func (c *periodCache) parse(s string, who names, ctx string) (*period, bool) {
	if !strings.Contains(s, " discussed ") {
		return nil, false // (as parsePeriod: most sentences, nothing cached)
	}
	k := sentKey{s, ctx}
	p, ok := c.get(k)
	if !ok {
		p, _ = parsePeriod(s, who) // (nil when it is no period line)
		if p != nil {
			p.keys = appendWordKeys(nil, p.phrases)
		}
		c.add(k, p)
	}
	if p == nil {
		return nil, false
	}
	cp := *p
	cp.names, cp.phrases = slices.Clone(p.names), slices.Clone(p.phrases)
	return &cp, true
}
