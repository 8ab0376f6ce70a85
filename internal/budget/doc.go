// Package budget serves bounded counters that never overspend (TAKE) and
// numbers unique across daemons (NEXT), at sidecar speed: each daemon
// holds leased shares of a budget and of a sequence, and serves from them
// in memory, exactly, with no round trip.
//
// The one idea to hold first: PostgreSQL never lets a unit be in two
// places. Every unit of a budget is remaining, leased (to one daemon),
// granted or forfeited, and every statement moves units between these
// states under CHECK constraints, so granted + leased + forfeited never
// exceeds the total whatever any daemon does. A daemon grants only from a
// lease the database has already moved out of remaining.
//
// A lease (budget_leases row) belongs to a holder, the daemon's journal
// instance id, which survives restarts. Its size is what the database
// still counts in it: units not granted plus units granted but not yet
// recorded. TAKE takes units from a lease in memory, journals a
// change.Grant (Bucket = lease id) before replying, and the round that
// flushes the journal records it against the lease exactly once per lane
// (RecordGrants, in the round's own transaction): size shrinks, the
// budget's units move from leased to granted. So after the journal is flushed, size is exactly the units
// the daemon has not granted, which is why a restarted daemon, once its
// replayed journal is committed, can return all of it (Manager.Run), and a
// stopping one does the same after its final flush.
//
// A TAKE that a lease in hand covers needs no round trip and no lock but
// its budget's: the server reserves the units (Reserve) and adds the grant
// to the connection's group of increments, so a pipeline's grants are one
// journal append and the group's reply for it is n; if the append fails,
// Unreserve puts the units back. Only a TAKE the lease cannot cover takes
// the slow path (Take): wait for a lease, or go to PostgreSQL.
//
// Lease size follows demand: about one flush interval of the key's recent
// TAKE rate (at least the units asked, doubling while leases run out
// faster than an interval), but never more than a quarter of the unleased
// remainder, so leases shrink geometrically as a budget nears zero. When a
// quarter of the remainder is less than max(n, 4), TAKE goes to PostgreSQL
// as one lock-free conditional update, so the last units are granted one
// by one, exactly. A lease unused for IdleReturn is returned, so units do
// not sit in an idle daemon while another sells out.
//
// Leases live for COUNTERD_LEASE_TTL: the daemon renews all of its leases
// in one statement every TTL/3, and grants from a lease only before its
// local deadline (the send time of the last renewal that succeeded plus
// the TTL, which is never later than the database's expiry). Any daemon
// forfeits leases past their expiry: their size moves from leased to
// forfeited, which is never granted again by anyone else. Grants the
// holder journaled before the deadline and records later move units from
// forfeited to granted (forfeited holds the lease's whole size, so it
// cannot go negative), and when the holder comes back it returns what is
// left. Forfeited units are therefore under-spend, bounded by the unused
// leases of daemons that never come back.
//
// Units a daemon will not grant go back to remaining as soon as it knows:
// a lease idle for IdleReturn or past its deadline, and, when TAKE finds
// the unleased remainder short, the key's leases whose pieces are each
// smaller than n. A return names the total the lease has returned
// (budget_leases.returned), so a retry after a lost reply returns nothing
// twice; a failed return is retried at the next tick.
//
// NEXT leases ranges [lo, hi] from budget_sequences in one statement and
// hands numbers out in order. The range is committed before any number of
// it is handed out, so numbers are unique across daemons and crashes
// without any journal: a crash, or a stop, skips the rest of the range.
package budget
