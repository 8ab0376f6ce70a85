// Package privdir opens a directory that must belong to counterd's user
// alone: the socket's directory and the journal directory. Anyone else who
// can write such a directory, or repoint the path to it, can take the
// socket (and collect AUTH passwords, acknowledge increments that never
// count) or plant journal segments that replay as increments.
//
// The one idea to hold first: the path's last component is checked without
// following it, and the directory itself is checked on the open file, not
// by name. Open lstats the path; a symbolic link is followed only if
// counterd's user or root owns it, each link of a chain alike, because a
// link's owner can repoint it at any time (another user pre-creating
// /tmp/counterd-<uid> as a link to a directory the daemon's user owns is
// the classic hijack). The directory is then opened with O_NOFOLLOW and
// O_DIRECTORY, and fstat on that descriptor must show a directory owned by
// counterd's user that group and others cannot write (the sticky bit does
// not help: it only stops deleting others' files, not planting one's own).
// A directory Open creates is made 0700, whatever the umask.
//
// This is what tmux does for /tmp/tmux-<uid> (lstat, refuse a
// non-directory, another owner or an open mode) and what Redis and
// PostgreSQL leave to the operator; ssh-agent sidesteps it with a random
// mkdtemp name. The directories above the checked one are the operator's
// choice and are trusted as given: in a sticky /tmp, no other user can
// rename or replace an entry counterd's user owns.
package privdir
