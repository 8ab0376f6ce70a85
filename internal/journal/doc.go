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
// Dir holds LOCK (flocked while a Journal is open), instance-id (32 hex
// characters, created once) and segments named %020d.seg after their
// sequence number. A segment starts with a 16-byte header: the magic
// "CNTJ", a little-endian uint32 version (1) and a little-endian uint64
// sequence number that must match the file name. Records follow:
//
//	uint32 LE payload length | uint32 LE CRC-32C (Castagnoli) of payload | payload
//	payload = uvarint item count, then per item:
//	          uvarint key length | key | zigzag varint delta
//
// One Append is one record, written with one write(2) call. Open validates
// every record and truncates a segment at the first torn or corrupt one,
// because every byte after it is suspect; a file shorter than its header
// (a crash right after it was created) gets its header rewritten and is
// returned as an empty segment.
//
// # Fsync modes
//
// The modes mean what Redis's appendfsync means:
//
//   - everysec (default): a background goroutine fsyncs the current segment
//     once a second if it changed.
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
// Recovery never loses a record that was fully written before the first
// damaged one in its segment.
package journal
