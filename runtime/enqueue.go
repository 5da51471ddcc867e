package skipjack

// EnqueueResult is what a generated EnqueueAll returns for one payload, in
// the order the payloads were given.
type EnqueueResult struct {
	// ID is the id of the payload's job: the job inserted for it or, for a
	// duplicate, the job that holds its unique key (which may be one
	// inserted for an earlier payload of the same call).
	ID int64
	// Duplicate reports that the payload inserted nothing because a job
	// in one of the queue's unique states already had its unique key. It
	// is always false for a queue without a unique key.
	Duplicate bool
}
