// Package server answers the Redis protocol on counterd's Unix socket.
//
// Each connection is served by one goroutine that answers every command
// already buffered before it writes the replies in one write and reads
// again, so a pipelining client costs one read and one write per batch.
// Increments go to a pending.Buffer and are acknowledged as soon as it has
// accepted them; reads and FLUSH go through the same buffer so they see
// everything this daemon has accepted.
//
// INCR, INCRBY, DECR and DECRBY reply with the amount the call added to the
// stored count (INCRBY k 5 replies 5), not the new total as Redis does:
// computing a total would cost a database read per increment. GET returns
// the total.
package server
