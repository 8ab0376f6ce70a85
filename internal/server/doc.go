// Package server answers the Redis protocol on counterd's Unix socket.
//
// Each connection is served by one goroutine that answers every command
// already buffered before it writes the replies in one write and reads
// again, so a pipelining client costs one read and one write per batch.
// Past 64 KiB of replies it writes them between commands and reads nothing
// more until the write completes: that bounds a connection's memory and is
// the backpressure on a client that does not read. Increments are grouped,
// journaled and folded (endGroup) before any later reply is written.
// Increments go to a pending.Buffer and are acknowledged as soon as it has
// accepted them; reads and FLUSH go through the same buffer so they see
// everything this daemon has accepted.
//
// Connections run under a context that the end of Serve's context does
// not cancel: on shutdown the server stops accepting, wakes idle readers
// and lets each connection answer what it already read, then closes what
// is left after Options.ShutdownTimeout. Accept errors (out of file
// descriptors, memory, buffers) are retried with backoff; past
// Options.MaxConns a new connection gets Redis's "max number of clients
// reached" and is closed.
//
// MULTI/EXEC (multi.go) queues commands, checked as they arrive, and EXEC
// accepts all their increments as one journal record or none of them.
//
// INCR, INCRBY, DECR and DECRBY reply with the amount the call added to the
// stored count (INCRBY k 5 replies 5), not the new total as Redis does:
// computing a total would cost a database read per increment. GET returns
// the total.
package server
