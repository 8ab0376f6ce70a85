package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// Server is a private PostgreSQL server for one test that stops and starts
// it (fault tests), so the shared server other tests use stays up.
type Server struct {
	tb   testing.TB
	dir  string
	user string // run server commands as this user; "" for the current one
	// URL connects to the server's postgres database.
	URL string
}

// StartServer initialises and starts a server in a fresh directory and
// stops and removes it when the test ends. As root it runs the server as
// the postgres user, since PostgreSQL refuses to run as root.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	initdb, err := pgBinary("initdb")
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgt")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{tb: tb, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root needs a postgres user to run the test server: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
		s.user = "postgres"
	}
	tb.Cleanup(func() {
		_ = s.pgctl("stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	if out, err := s.command(initdb, "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf("listen_addresses = ''\nunix_socket_directories = '%s'\nport = 5432\nfsync = off\nmax_connections = 50\n", dir)
	f, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		tb.Fatal(err)
	}
	s.URL = fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=5432&sslmode=disable", dir)
	s.Start()
	return s
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	if err := s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "log")); err != nil {
		s.tb.Fatalf("start test server: %v", err)
	}
}

// Stop stops the server with pg_ctl's mode: "immediate" is a crash.
func (s *Server) Stop(mode string) {
	s.tb.Helper()
	if err := s.pgctl("stop", "-w", "-m", mode); err != nil {
		s.tb.Fatalf("stop test server: %v", err)
	}
}

func (s *Server) pgctl(args ...string) error {
	pgctl, err := pgBinary("pg_ctl")
	if err != nil {
		return err
	}
	args = append([]string{"-D", s.data()}, args...)
	if out, err := s.command(pgctl, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %v: %w\n%s", args, err, out)
	}
	return nil
}

func (s *Server) command(bin string, args ...string) *exec.Cmd {
	if s.user == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("runuser", append([]string{"-u", s.user, "--", bin}, args...)...)
}

// pgBinary finds a PostgreSQL server program on PATH or in Debian's
// versioned directories, newest first.
func pgBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: install the PostgreSQL server (apt-get install postgresql)", name)
}
