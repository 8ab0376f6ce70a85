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
// Every command is declared once, in table.go's commandTable: name,
// arity, flags, key positions and summary as Redis reports them, its
// handler, and counterd's own flags (blocking, what it does inside MULTI,
// its fast path). Dispatch (dispatch.go) is one path for a connection
// served by a goroutine, by an event loop and inside MULTI: fast path,
// lookup, arity, authentication, policy, handler. So an unknown command,
// a wrong number of arguments, a connection that has not given
// COUNTERD_PASSWORD and a command refused inside MULTI are answered from
// the table as Redis answers them, and COMMAND, COMMAND INFO and COMMAND
// DOCS are generated from it. The fast path comes first: a well-formed
// INCR (or TAKE with a lease in hand) joins the connection's group before
// any lookup, so the hot path stays free of allocations and map lookups.
// Adding a command is one table entry and one handler.
//
// A connection speaks RESP2 until HELLO 3, then RESP3: the replies whose
// type differs (HELLO, CONFIG GET and COMMAND DOCS are maps, nulls are
// "_", INFO and CLIENT LIST are verbatim strings, COMMAND's flags are
// sets) go through proto.go; every other reply is the same in both.
// HELLO and INFO report redis_version 7.2.0, the Redis release whose
// protocol counterd follows, because clients gate features on it;
// counterd's own version is INFO's counterd_version. Per-connection state
// (id, protocol, name, library, authentication) is the session's
// connState; the registry lists open sessions for CLIENT LIST.
//
// A command a transaction may hold is described once (call.go): its
// changes, the keys it reads, its reply. Run at once, it is a batch of
// one call; MULTI (multi.go) queues the calls, checked as they arrive, and
// EXEC runs them as one batch, all their changes one journal record or
// none of them (multi_exec.go).
//
// With Options.IO "loop" (COUNTERD_IO=loop, the daemon's default on
// Linux) connections are served by event loops instead (loop_linux.go,
// loop_pass_linux.go; Options.Loops of them, by default half of
// GOMAXPROCS): each owns an epoll instance, reads every readable
// connection once per pass
// (edge-triggered, a short read means drained, so no read finds nothing),
// accepts the increments of every connection in the pass with one
// AddGroup on the loop's own pending.Shard (its own maps, lock and journal
// record buffer, so loops do not wait for each other; one journal record:
// one write(2) per pass, as Redis's beforeSleep writes the AOF), then
// writes the replies. Checking
// the concatenated groups gives each item the error separate calls would.
// Any other command ends a connection's part of the pass; it runs on the
// loop unless the table marks it blocking (PING, HELLO, CLIENT, queueing
// inside MULTI... run there), else on a goroutine while the loop keeps
// off that connection, which keeps its replies in order. Replies the socket does not take wait in a
// per-connection buffer written on EPOLLOUT; past half of
// Options.OutputLimit the connection is neither read nor parsed, the
// outbox's backpressure. A connection without a descriptor (net.Pipe in
// tests) is served by a goroutine as before. The loops need epoll, so
// only Linux has them, as Redis's ae.c picks its multiplexer per system:
// elsewhere (macOS; loop_other.go) Serve refuses IO "loop" with an error
// rather than serve some other way than asked, and the daemon's
// configuration defaults to goroutines and refuses COUNTERD_IO=loop.
//
// The loop is ours, not gnet v2's (github.com/panjf2000/gnet/v2 v2.9.7),
// for reasons of fit rather than speed: gnet removes the socket path
// before binding (counterd's socket package locks and checks the path
// itself), has no hook at the end of a loop pass (the one journal write
// per pass needs it: OnTraffic is per connection), and has no output
// backpressure (AsyncWrite buffers without bound). Measured side by side
// with the same journal, shards and store behind each (bench/gnetproto),
// this loop also took less CPU per INCR, unpipelined and pipelined (the
// figures are in docs/performance.md, under "Event loops"); gnet's
// OnTraffic makes one journal record per connection wake where this loop
// makes one per pass.
//
// INCR, INCRBY, DECR and DECRBY reply with the amount the call added to the
// stored count (INCRBY k 5 replies 5), not the new total as Redis does:
// computing a total would cost a database read per increment. GET returns
// the total.
package server
