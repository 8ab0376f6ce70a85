// Package resp reads Redis protocol commands from a client connection and
// appends Redis protocol replies (RESP2, and the RESP3 types a connection
// uses after HELLO 3), without allocating per command.
//
// The one idea to hold first: a command returned by [Reader.Next] aliases the
// Reader's buffer, so it is valid only until the next [Reader.Fill]. A server
// answers every command already buffered, writes the replies, and only then
// reads again:
//
//	for {
//		for {
//			args, ok, err := rd.Next()
//			if err != nil { // a *ProtocolError: tell the client, then close, as Redis does
//				out = resp.AppendError(out, "ERR "+err.Error())
//				conn.Write(out)
//				return err
//			}
//			if !ok {
//				break
//			}
//			out = handle(out, args)
//		}
//		conn.Write(out)
//		out = out[:0]
//		if err := rd.Fill(); err != nil {
//			return err
//		}
//	}
//
// Draining the buffer before reading again is what batches the replies of a
// pipelining client (redis-benchmark -P, go-redis pipelines) into one write.
// (counterd's server also writes early once the replies pass a bound, so a
// burst of commands with large replies does not pile up in memory.)
//
// Two request forms are accepted, as in Redis. Multibulk requests
// ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") are what every client library sends.
// Inline commands are lines of words separated by spaces or tabs
// ("GET k\r\n"), as typed into nc -U or telnet. Unlike Redis, inline
// commands do not support quoting: quotes and backslashes are ordinary bytes,
// so an inline argument cannot contain a space, tab or newline. Nothing is
// lost, because counterd keys cannot contain whitespace.
//
// The limits ([MaxCommandBytes], [MaxArgs], [MaxBulkLen], and 64 KiB for an
// inline line, or those given to [Reader.SetLimits], such as
// [UnauthenticatedLimits]) are enforced as soon as a header announces a
// size or a line outgrows it, before more data arrives, so a hostile
// client cannot make the buffer grow past them.
package resp
