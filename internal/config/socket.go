package config

import (
	"path/filepath"
	"strconv"
)

// SocketRule says where counterd listens when COUNTERD_SOCKET is empty;
// -h prints it, DefaultSocket implements it.
const SocketRule = "$XDG_RUNTIME_DIR/counterd/counterd.sock if XDG_RUNTIME_DIR is set, else /run/counterd/counterd.sock as root, else ${TMPDIR:-/tmp}/counterd-<uid>/counterd.sock"

// DefaultSocket resolves SocketRule for the environment env and user id
// uid. The rule picks a directory counterd can own (created 0700 when
// missing) rather than world-writable /tmp, where another user could bind
// the path first and receive the application's increments. Another user
// can still create /tmp/counterd-<uid> first, as a directory or a link;
// socket.Reserve refuses both rather than following them.
func DefaultSocket(env map[string]string, uid int) string {
	if d := env["XDG_RUNTIME_DIR"]; filepath.IsAbs(d) {
		return filepath.Join(d, "counterd", "counterd.sock")
	}
	if uid == 0 {
		return "/run/counterd/counterd.sock"
	}
	tmp := env["TMPDIR"]
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "counterd-"+strconv.Itoa(uid), "counterd.sock")
}
