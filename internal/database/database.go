// Package database opens the pgx pool both binaries use and waits for the
// server to answer, describing failures without ever printing the URL
// (which may carry a password).
//
// Every connection carries server-side deadlines (statement_timeout and
// lock_timeout), so a statement stuck behind a lock or a runaway plan
// fails with the server's own reason instead of hanging until a context
// deadline cuts the connection.
package database

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure Open.
type Options struct {
	// MaxConns caps the pool (0 keeps pgx's default).
	MaxConns int
	// StatementTimeout sets statement_timeout on every connection; 0
	// leaves the server's setting.
	StatementTimeout time.Duration
	// LockTimeout sets lock_timeout on every connection; 0 leaves the
	// server's setting.
	LockTimeout time.Duration
}

// Open parses url and returns a pool configured by opts. It does not
// connect: the pool dials on first use, so a daemon can start while its
// database is down. A statement_timeout or lock_timeout the URL sets
// itself (as a parameter or in options=-c ...) wins over opts.
func Open(url string, opts Options) (*pgxpool.Pool, error) {
	const invalid = "DATABASE_URL is not a valid PostgreSQL URL or DSN"
	if scheme, ok := foreignScheme(url); ok {
		// pgx reads anything not starting postgres:// or postgresql:// as
		// keyword/value settings: postgress://u:pw@h/db?sslmode=disable
		// became one unknown setting, and the pool dialed the local
		// socket as the current user.
		return nil, fmt.Errorf("%s: scheme %s:// is neither postgres:// nor postgresql://", invalid, scheme)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the URL; say only what is wrong.
		return nil, errors.New(invalid)
	}
	if !isURL(url) && !namesServer(url) {
		// A string naming neither is most likely something else (a URL
		// missing its scheme, a mistyped one) that happened to hold an =.
		return nil, errors.New(invalid + ": a keyword/value DSN must name host or dbname")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(opts.MaxConns)
	}
	params := cfg.ConnConfig.RuntimeParams
	// A generic plan cached while a table was small keeps a sequential
	// scan per key as it grows, until the next ANALYZE invalidates it;
	// planning each statement for the table as it is costs far less. (The
	// write function sets this too, for any other client that calls it.)
	setDefault(params, "plan_cache_mode", "force_custom_plan")
	if opts.StatementTimeout > 0 {
		setDefault(params, "statement_timeout", milliseconds(opts.StatementTimeout))
	}
	if opts.LockTimeout > 0 {
		setDefault(params, "lock_timeout", milliseconds(opts.LockTimeout))
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

// isURL reports whether pgx reads s as a URL rather than keyword/value
// settings.
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// foreignScheme returns the scheme of s when s starts as a URL (an RFC
// 3986 scheme, then ://) that pgx would not read as one. The scheme
// comes before any user or password, so it can be shown.
func foreignScheme(s string) (string, bool) {
	scheme, _, found := strings.Cut(s, "://")
	if !found || isURL(s) || scheme == "" {
		return "", false
	}
	for i, c := range scheme {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return scheme, true
}

// namesServer reports whether the keyword/value settings s (which pgx
// parsed) set host, hostaddr or dbname. It reads keywords as pgx does: a
// value runs to the next space unless single-quoted, and a backslash
// escapes the next byte.
func namesServer(s string) bool {
	for {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return false
		}
		switch strings.TrimSpace(s[:eq]) {
		case "host", "hostaddr", "dbname", "database": // pgx takes database for dbname
			return true
		}
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\v\f")
		quoted := strings.HasPrefix(s, "'")
		if quoted {
			s = s[1:]
		}
		end := 0
		for ; end < len(s); end++ {
			if s[end] == '\\' {
				end++
				continue
			}
			if quoted && s[end] == '\'' || !quoted && strings.IndexByte(" \t\n\r\v\f", s[end]) >= 0 {
				break
			}
		}
		s = s[min(end+1, len(s)):]
	}
}

// setDefault sets the run-time parameter name unless the URL set it,
// directly or as a -c switch in options. PostgreSQL applies startup
// parameters after options, so setting both would override the user.
func setDefault(params map[string]string, name, value string) {
	if _, set := params[name]; set {
		return
	}
	for _, f := range strings.Fields(params["options"]) {
		f = strings.TrimPrefix(strings.TrimPrefix(f, "-c"), "--")
		// PostgreSQL treats - and _ alike in a -c or --name=value switch.
		f = strings.ReplaceAll(f, "-", "_")
		if strings.HasPrefix(f, name+"=") {
			return
		}
	}
	params[name] = value
}

// milliseconds formats d for a timeout setting, whose unit is ms; a
// positive d never rounds down to 0, which would mean no timeout.
func milliseconds(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

// Wait pings the server until it answers, for at most wait. It returns at
// once on an error retrying cannot fix (authentication, a missing
// database, bad connection settings), and otherwise, when wait runs out,
// with the last error a ping returned rather than the deadline's.
func Wait(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c := pool.Config().ConnConfig
	where := fmt.Sprintf("database %s:%d/%s", c.Host, c.Port, c.Database)
	var last error
	for {
		pctx, cancelPing := context.WithTimeout(ctx, 5*time.Second)
		err := pool.Ping(pctx)
		cancelPing()
		if err == nil {
			return nil
		}
		// A ping cut short by the deadline says only that; keep the
		// reason the attempt before it failed.
		if last == nil || ctx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
			last = safe(err)
		}
		if Permanent(err) {
			return fmt.Errorf("%s refused the connection: %w", where, last)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s unreachable for %v: %w", where, wait, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Permanent reports whether err is a connection failure that retrying
// cannot fix: invalid authorization (SQLSTATE class 28), a database that
// does not exist (3D000), or connection settings pgconn cannot use.
func Permanent(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "3D000"
	}
	var cfgErr *pgconn.ParseConfigError
	return errors.As(err, &cfgErr)
}

// safe returns err, or a plain description when its text could quote the
// connection string.
func safe(err error) error {
	var cfgErr *pgconn.ParseConfigError
	if errors.As(err, &cfgErr) {
		return errors.New("the connection settings are invalid")
	}
	return err
}
