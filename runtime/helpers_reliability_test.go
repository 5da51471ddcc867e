package skipjack_test

import "maps"

// count returns how often the job with id ran.
func (c *tally) count(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

// snapshot returns how often each job ran.
func (c *tally) snapshot() map[int64]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}
