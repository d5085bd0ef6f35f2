package offline

import "sync"

// genCache is a bounded map with two generations: entries are added to
// cur; when cur is full it becomes old and a new cur starts; a hit in old
// is promoted. It holds between size and twice as many entries. The caches
// built on it (sentCache, heldCache, periodCache) only save work: a miss
// recomputes the same value, so results never depend on what they hold.
type genCache[V any] struct {
	mu       sync.Mutex
	cur, old map[sentKey]V
	size     int
}

func (c *genCache[V]) init(size int) {
	c.cur, c.size = make(map[sentKey]V, size), size
}

// getLocked returns k's value, promoting a hit in the old generation.
// c.mu should be held.
func (c *genCache[V]) getLocked(k sentKey) (V, bool) {
	v, ok := c.cur[k]
	if !ok {
		if v, ok = c.old[k]; ok {
			c.addLocked(k, v)
		}
	}
	return v, ok
}

// addLocked adds k's value, starting a new generation when cur is full.
// c.mu should be held.
func (c *genCache[V]) addLocked(k sentKey, v V) {
	if len(c.cur) >= c.size {
		c.old, c.cur = c.cur, make(map[sentKey]V, c.size)
	}
	c.cur[k] = v
}

func (c *genCache[V]) get(k sentKey) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(k)
}

func (c *genCache[V]) add(k sentKey, v V) {
	c.mu.Lock()
	c.addLocked(k, v)
	c.mu.Unlock()
}
