package pending

// Stats are the buffer's counts since it was created, as its metrics
// report them; the server's INFO command shows them.
type Stats struct {
	Accepted       uint64 // increments accepted
	Rejected       uint64 // increments refused (-BUSY)
	Flushes        uint64 // rounds committed
	FlushErrors    uint64 // failed attempts to write a round
	ReplayedRounds uint64 // rounds recovered from the journal at start
	PendingKeys    int    // keys accepted and not yet in a round
	QueuedRounds   int    // rounds cut and not yet committed
	Journaled      bool   // increments are journaled before they are acknowledged
	JournalBytes   int64  // journal bytes not yet committed (0 without a journal)
}

// Stats reports the buffer's counts now.
func (b *Buffer) Stats() Stats {
	m := b.flusher.m
	st := Stats{
		Accepted:       m.accepted.Get(),
		Rejected:       m.rejected.Get(),
		Flushes:        m.flushes.Get(),
		FlushErrors:    m.flushErrors.Get(),
		ReplayedRounds: m.replayedRounds.Get(),
		PendingKeys:    b.PendingKeys(),
		QueuedRounds:   b.QueuedRounds(),
		Journaled:      b.acc.jr != nil,
	}
	if j, ok := b.acc.jr.(interface{ Bytes() int64 }); ok {
		st.JournalBytes = j.Bytes()
	}
	return st
}
