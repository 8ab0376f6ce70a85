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
// receive the application's increments) or replace it, and a directory
// path another user controls, such as a /tmp/counterd-<uid> they made as
// a symbolic link to a directory the daemon's user owns, can be repointed
// later at a fake server that collects AUTH passwords and acknowledges
// increments that never count. Reserve opens the directory with
// privdir.Open (creating it 0700 when missing): the path is lstat'ed and
// a symbolic link is followed only if counterd's user or root owns it;
// the directory is opened with O_NOFOLLOW and must be owned by counterd's
// user, and not writable by group or others, checked with fstat on that
// descriptor. The lock file is opened relative to that descriptor. A
// refused directory is a setting to change, so counterd exits 2 naming
// it, its owner and mode, and what to do; nothing else is created first.
// tmux treats /tmp/tmux-<uid> the same way; the directories above the
// socket's are trusted as configured.
//
// Reserve (the check and the lock) and Reservation.Listen (the bind) are
// separate so that counterd can reserve the socket before it creates its
// journal directory, yet bind only once it is ready to serve.
package socket
