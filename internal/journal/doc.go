// Package journal is counterd's local write-ahead log: an increment is
// appended here before it is acknowledged, so a killed daemon loses nothing
// it acknowledged.
//
// The one idea to hold first: each segment file is one round. The daemon
// calls Rotate at the moment it swaps its in-memory state into a new round,
// and Removes the closed segment once that round is committed in
// PostgreSQL. On restart Open returns every segment still on disk, and the
// daemon replays each as its own round under its own sequence number;
// PostgreSQL remembers the last committed sequence number, so a segment
// that was committed but not yet removed is skipped by the caller.
//
// # Files
//
// Dir itself is flocked while a Journal is open (a lock file could be
// deleted and let a second daemon in; the directory cannot be replaced
// under its segments). It holds instance-id (32 hex characters, created
// once), database (which database the rounds belong to, written by the
// daemon through SaveBinding), segments named %020d.seg after their
// sequence number, committed segment files kept for reuse, named
// %020d.free, and damaged/, where the originals of repaired segments are
// kept. A segment starts with a 36-byte header: the magic "CNTJ", a
// little-endian uint32 format version (2), a little-endian uint64
// sequence number that must match the file name, the 16-byte generation of
// the Journal that created it, and a little-endian CRC-32C of those 32
// bytes. Records follow:
//
//	uint32 LE payload length | uint32 LE CRC-32C (Castagnoli) of payload | payload
//	payload = uvarint item count, then per item:
//	          kind byte | uvarint key length | key | zigzag varint delta |
//	          uvarint bits of the float64 variance | zigzag varint bucket (0 for Total)
//
// Version 1 segments, from before generations, kinds and buckets, have a
// 16-byte header (magic, version 1, sequence number) and items without the
// kind byte and the bucket. They are read as changes of kind Total in
// bucket 0, and never rewritten to convert them. Any other version, or a
// record of an unknown kind, makes Open fail and leaves the file alone:
// a newer counterd wrote it.
//
// # Generations
//
// Every Open makes a fresh random generation and writes it into each
// segment it creates. With the instance id and the sequence number it
// identifies a round, so that rounds written after the directory was
// restored from an older snapshot, which reuse sequence numbers, are never
// mistaken for rounds committed before.
//
// # Damage
//
// One Append is one record, written with one write(2) call. Open validates
// every record. A record whose length fits in the file but whose checksum
// or payload is bad is skipped, and the records after it are kept: its
// length still says where the next one starts. Framing that runs past the
// end of the file (a torn tail), or a length no record can have, ends the
// segment there. A damaged segment is never modified in place: the
// original is hard linked into damaged/, and a copy holding only its good
// records is fsynced and renamed over it. A file shorter than its header
// (a crash right after it was created) is replaced the same way by a bare
// header and returned as an empty segment. If the repair itself fails (a
// full disk), the segment is recovered all the same and left as it is.
//
// # Full disk
//
// Open needs no free space: if the new segment or the instance-id file
// cannot be created, Open still returns the recovered segments, and
// Append creates them (the instance id first) and fails until it can.
// Removing committed segments is what frees the disk (a reused file is
// truncated to its header), and a reused file needs no new space, so
// rounds keep rotating on a full disk once one is pooled.
//
// # Reused segment files
//
// A round costs no file creation or unlink (and in everysec no fsync of
// its own): Remove truncates a committed segment to its header and renames
// it to %020d.free, keeping at most poolCap of them (unlinking the rest),
// and Seal prepares the next segment from one, off the accept path: the
// new header is written in place over the old one and fsynced, and only
// then is the file renamed to its new segment name. So a segment's name
// never holds another round's records, across kill -9 or power loss:
//
//   - until the rename, the file has an old name. A .free file is deleted
//     by Open; a segment file whose good header names a later segment than
//     its file name (power loss undid a rename) is dropped by Open, and set
//     aside in damaged/ if records follow the header. Any other mismatch
//     of header and name is still an error.
//   - the truncation is fsynced with the header, before the rename.
//   - the directory is fsynced before the first record of a reused file
//     counts as durable (fsyncLocked), not at once, so in everysec one
//     directory fsync a second covers every rename.
//
// Segments are written with pwrite at their size rather than O_APPEND, so
// a header can be rewritten. In FsyncNo, where nothing orders the header
// and the rename, files are created and unlinked as before.
//
// # Fsync modes
//
// The modes mean what Redis's appendfsync means:
//
//   - everysec (default): a background goroutine fsyncs the current segment
//     once a second if it changed, and the segments Seal closed since its
//     last tick, except those Removed first (their rounds are committed).
//   - always: WaitDurable returns once the record is fsynced; concurrent
//     waiters share one fsync (group commit).
//   - no: never fsync; the kernel writes back when it likes.
//
// # Guarantees
//
// In every mode a record has reached the kernel (write(2) has returned)
// before Append returns, so kill -9 of the daemon loses nothing that was
// acknowledged after Append. Power loss or a kernel crash can lose up to
// about a second of records in everysec, nothing that WaitDurable confirmed
// in always, and whatever the kernel had not yet written back in no.
// Recovery never loses a good record that was fully written before the
// first torn or unframeable one in its segment, nor one after a record
// whose checksum or payload alone is damaged.
package journal
