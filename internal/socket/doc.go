// Package socket creates counterd's Unix socket so that no other process
// can take it over: in a directory only the daemon's user may write, and
// only while holding an exclusive lock on "<socket>.lock" beside it.
//
// The one idea to hold first: the lock, not a probe, decides whether a
// socket left on disk is stale. Dialing a socket to see if someone answers
// is wrong both ways: a live daemon whose accept backlog is full refuses
// the dial (EAGAIN) and would have its socket deleted under it, and a dead
// one cannot be told from a slow one. A flock is released by the kernel
// when its holder exits, however it exits, so whoever holds the lock owns
// the path, may remove a stale socket and bind; everyone else fails with
// ErrInUse without touching the path.
//
// The lock sits beside the socket rather than being the journal
// directory's lock: the socket path is what two daemons contend for, and a
// lock keyed on it also covers COUNTERD_JOURNAL=false (no journal
// directory) and two daemons given different journal directories but the
// same socket. The lock file is never removed: removing it would let a
// third daemon lock a fresh file while a second still waits on the old
// inode, and both would believe they own the path.
//
// The directory check closes the other hijack: in a world-writable
// directory such as /tmp, another user can bind the path first (and
// receive the application's increments) or replace it. Listen creates a
// missing directory 0700 and refuses one that group or others can write,
// or that another user owns.
package socket
