package config_test

import (
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/config"
	"github.com/counterd/counterd/internal/glob"
	"github.com/counterd/counterd/internal/retention"
	"github.com/counterd/counterd/internal/windows"
)

// Every range Counterd.Validate checks, with its exact message (the docs
// quote them) on the first value out of range and no error on the last
// value in it.
func TestValidateCounterd(t *testing.T) {
	t.Parallel()
	load := func(env ...string) error {
		_, err := config.Load[config.Counterd](append([]string{"DATABASE_URL=postgres://x/y"}, env...))
		return err
	}
	f := func(bad, want string, good ...string) {
		t.Helper()
		if err := load(strings.Fields(bad)...); err == nil || err.Error() != want {
			t.Errorf("%s: got %v; want %q", bad, err, want)
		}
		for _, g := range good {
			if err := load(strings.Fields(g)...); err != nil {
				t.Errorf("%s: got %v; want no error", g, err)
			}
		}
	}
	f("COUNTERD_SOCKET=/"+strings.Repeat("a", 107), "COUNTERD_SOCKET: path longer than the 107 bytes a Unix socket allows",
		"COUNTERD_SOCKET=/"+strings.Repeat("a", 106))
	f("COUNTERD_IO=threads", `COUNTERD_IO: "threads" is not goroutines or loop`, "COUNTERD_IO=goroutines")
	if !config.EventLoops {
		f("COUNTERD_IO=loop", "COUNTERD_IO: loop needs epoll, which only Linux has; use goroutines")
	}
	f("COUNTERD_LOOPS=-1", "COUNTERD_LOOPS: must be 0..256", "COUNTERD_LOOPS=0", "COUNTERD_LOOPS=256")
	f("COUNTERD_LOOPS=257", "COUNTERD_LOOPS: must be 0..256")
	f("COUNTERD_ACK=fsync", `COUNTERD_ACK: "fsync" is not journal or commit`, "COUNTERD_ACK=journal", "COUNTERD_ACK=commit")
	f("COUNTERD_JOURNAL_MAX_BYTES=1048575", "COUNTERD_JOURNAL_MAX_BYTES: must be at least 1048576 (1 MiB)", "COUNTERD_JOURNAL_MAX_BYTES=1048576")
	f("COUNTERD_FLUSH_INTERVAL=0s", "COUNTERD_FLUSH_INTERVAL: must be positive", "COUNTERD_FLUSH_INTERVAL=1ns")
	f("COUNTERD_FLUSH_MAX_KEYS=0", "COUNTERD_FLUSH_MAX_KEYS: must be at least 1", "COUNTERD_FLUSH_MAX_KEYS=1")
	f("COUNTERD_FLUSH_TIMEOUT=0s", "COUNTERD_FLUSH_TIMEOUT: must be positive", "COUNTERD_FLUSH_TIMEOUT=1ns")
	f("COUNTERD_MAX_PENDING_KEYS=0", "COUNTERD_MAX_PENDING_KEYS: must be at least 1", "COUNTERD_MAX_PENDING_KEYS=1")
	f("COUNTERD_HOT_RATE=0", "COUNTERD_HOT_RATE: must be positive", "COUNTERD_HOT_RATE=0.5")
	f("COUNTERD_HOT_TARGET=-1", "COUNTERD_HOT_TARGET: must be positive", "COUNTERD_HOT_TARGET=0.5")
	f("COUNTERD_HOT_MAX_N=0", "COUNTERD_HOT_MAX_N: must be at least 1", "COUNTERD_HOT_MAX_N=1")
	f("COUNTERD_SLOTS=0", "COUNTERD_SLOTS: must be 1..32767", "COUNTERD_SLOTS=1", "COUNTERD_SLOTS=32767")
	f("COUNTERD_SLOTS=32768", "COUNTERD_SLOTS: must be 1..32767")
	f("COUNTERD_WRITERS=0", "COUNTERD_WRITERS: must be 1..16", "COUNTERD_WRITERS=1", "COUNTERD_WRITERS=16 COUNTERD_DB_MAX_CONNS=17")
	f("COUNTERD_WRITERS=17 COUNTERD_DB_MAX_CONNS=18", "COUNTERD_WRITERS: must be 1..16")
	f("COUNTERD_WRITERS=4 COUNTERD_DB_MAX_CONNS=4", "COUNTERD_DB_MAX_CONNS: must exceed COUNTERD_WRITERS, so reads get a connection while a round is written",
		"COUNTERD_WRITERS=4 COUNTERD_DB_MAX_CONNS=5")
	f("COUNTERD_MAX_CONNS=0", "COUNTERD_MAX_CONNS: must be at least 1", "COUNTERD_MAX_CONNS=1")
	f("COUNTERD_CLIENT_QUERY_BUFFER_LIMIT=65535", "COUNTERD_CLIENT_QUERY_BUFFER_LIMIT: must be 65536..1073741824 (64 KiB to 1 GiB)",
		"COUNTERD_CLIENT_QUERY_BUFFER_LIMIT=65536", "COUNTERD_CLIENT_QUERY_BUFFER_LIMIT=1073741824")
	f("COUNTERD_CLIENT_QUERY_BUFFER_LIMIT=1073741825", "COUNTERD_CLIENT_QUERY_BUFFER_LIMIT: must be 65536..1073741824 (64 KiB to 1 GiB)")
	f("COUNTERD_CLIENT_OUTPUT_LIMIT=1048575", "COUNTERD_CLIENT_OUTPUT_LIMIT: must be at least 1048576 (1 MiB)", "COUNTERD_CLIENT_OUTPUT_LIMIT=1048576")
	f("COUNTERD_CLIENT_WRITE_TIMEOUT=0s", "COUNTERD_CLIENT_WRITE_TIMEOUT: must be positive", "COUNTERD_CLIENT_WRITE_TIMEOUT=1ns")
	f("COUNTERD_LEASE_TTL=299ms", "COUNTERD_LEASE_TTL: must be at least 300ms", "COUNTERD_LEASE_TTL=300ms COUNTERD_OWNER_TTL=300ms")
	f("COUNTERD_LEASE_TTL=1m COUNTERD_OWNER_TTL=59s", "COUNTERD_OWNER_TTL: must be at least COUNTERD_LEASE_TTL", "COUNTERD_LEASE_TTL=1m COUNTERD_OWNER_TTL=1m")
	f("COUNTERD_SHUTDOWN_TIMEOUT=0s", "COUNTERD_SHUTDOWN_TIMEOUT: must be positive", "COUNTERD_SHUTDOWN_TIMEOUT=1ns")
	f("COUNTERD_STATEMENT_TIMEOUT=-1ns", "COUNTERD_STATEMENT_TIMEOUT: must not be negative", "COUNTERD_STATEMENT_TIMEOUT=0s")
	f("COUNTERD_LOCK_TIMEOUT=-1ns", "COUNTERD_LOCK_TIMEOUT: must not be negative", "COUNTERD_LOCK_TIMEOUT=0s")
	f("COUNTERD_LOG_FORMAT=xml", `COUNTERD_LOG_FORMAT: "xml" is not text or json`, "COUNTERD_LOG_FORMAT=json")

	// Rules checked by their own parsers quote the parser's message.
	const badSample, badWindows, badTTL = "view:*,", "post:*=fortnight:2h", "session:*=forever"
	_, gerr := glob.Parse(badSample)
	_, werr := windows.Parse(badWindows)
	_, terr := retention.Parse(badTTL)
	if gerr == nil || werr == nil || terr == nil {
		t.Fatalf("glob %v, windows %v, retention %v; want all three to fail", gerr, werr, terr)
	}
	f("COUNTERD_WINDOWS="+badWindows, "COUNTERD_WINDOWS: "+werr.Error(), "COUNTERD_WINDOWS=post:*=minute:2h")
	f("COUNTERD_KEY_TTL="+badTTL, "COUNTERD_KEY_TTL: "+terr.Error(), "COUNTERD_KEY_TTL=session:*=1d")
	f("COUNTERD_SAMPLE_KEYS="+badSample, "COUNTERD_SAMPLE_KEYS: "+gerr.Error(), "COUNTERD_SAMPLE_KEYS=view:*")

	// The first rule broken is the one reported, in the order above.
	f("COUNTERD_LOOPS=-1 COUNTERD_SLOTS=0 COUNTERD_LOG_FORMAT=xml", "COUNTERD_LOOPS: must be 0..256")
	f("COUNTERD_LOCK_TIMEOUT=-1ns COUNTERD_WINDOWS="+badWindows, "COUNTERD_LOCK_TIMEOUT: must not be negative")
	f("COUNTERD_KEY_TTL="+badTTL+" COUNTERD_WINDOWS="+badWindows+" COUNTERD_SAMPLE_KEYS="+badSample, "COUNTERD_SAMPLE_KEYS: "+gerr.Error())
	f("COUNTERD_KEY_TTL="+badTTL+" COUNTERD_WINDOWS="+badWindows, "COUNTERD_WINDOWS: "+werr.Error())
	f("COUNTERD_KEY_TTL="+badTTL+" COUNTERD_LOG_FORMAT=xml", "COUNTERD_KEY_TTL: "+terr.Error())
}
