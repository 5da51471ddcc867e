package skipjack_test

// count returns how often the job with id ran.
func (c *tally) count(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}
