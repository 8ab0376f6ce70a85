// Package store is the contract between the daemon's memory and the
// database it writes rounds into: the Store interface, and the values
// that cross it (round identities, lanes and their watermarks, what a
// read saw, and the errors a store may return). internal/pending holds
// rounds and reads through a Store; internal/slots is the PostgreSQL
// store. Every store passes the conformance suite of
// internal/store/storetest, which checks what follows.
//
// Rounds are exactly once per lane. Keys hash into Lanes lanes (LaneOf);
// ApplyOnce writes a key's changes only if its lane has not recorded the
// round's sequence number or a later one of the same identity (instance
// and generation; every identity counts on its own), and records the
// round in the lane in the same transaction as its changes. A round
// applied again, or an older one, is skipped; on error some lanes may be
// committed, and applying the same round again writes exactly what is
// missing.
//
// Reads are snapshots. Read, ReadBuckets and ReadTop return stored values
// and the watermarks of the identities asked about as of one moment, so a
// caller holding rounds in memory adds a round to a key exactly when its
// sequence number is above the watermark of the key's lane, and the sum
// is exact however rounds commit meanwhile.
//
// Kinds: Total adds to a key's total; Minute, Hour and Day add to one
// bucket of the key, apart from its total; Set replaces the total and
// its variance and removes the expiry; Expire sets the expiry (0 removes
// it), after which the key reads 0 and its next write starts from
// nothing; Grant records units against a budget lease, never beyond the
// lease, and drops a grant whose lease is gone rather than fail the
// round. A round holds one change per key, kind and bucket, and a key's
// Set comes before its Expire and increments.
//
// Counts never overflow where they are stored: a total beyond int64 is
// read exactly (Estimate.Wide) for that key alone, a bucket or top read of
// one wraps ErrOverflow, and Overflows counts them (once the store's own
// background work, such as a fold, has run). Writers of different
// identities on one hot key are exact. Once another daemon has taken an
// instance over, ApplyOnce of a round of any generation but the new
// owner's (and those it adopted) fails with ErrFenced and writes nothing.
package store
