package pending

import "time"

// JournalRefusal is a journal append that failed with no append
// succeeding since: while it stands, groups like it are refused (-BUSY
// for a journal at its limit, -ERR for a disk that fails the write).
// /acceptingz reports it.
type JournalRefusal struct {
	Err   error     // the last append's error; wraps journal.ErrFull at the limit
	Bytes int       // the refused record's size
	Since time.Time // the first refusal since the last append that succeeded
}

// JournalRefused returns the standing refusal, or nil when the last
// journal append succeeded (or none failed).
func (b *Buffer) JournalRefused() *JournalRefusal { return b.acc.refusal.Load() }

// noteAppend records how a journal append of size bytes ended. Only a
// change of state stores: the accept path pays one atomic load.
func (a *Accumulator) noteAppend(err error, size int) {
	last := a.refusal.Load()
	if err == nil {
		if last != nil {
			a.refusal.Store(nil)
		}
		return
	}
	r := &JournalRefusal{Err: err, Bytes: size, Since: time.Now()}
	if last != nil {
		r.Since = last.Since
	}
	a.refusal.Store(r)
}
