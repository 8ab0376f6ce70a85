package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/server"
)

// accepting answers /acceptingz: whether a client's increments are taken
// now, which needs the socket served and the journal writable, and not
// PostgreSQL. A Kubernetes readiness probe asks it rather than /readyz,
// because a native sidecar's readiness gates the whole pod.
type accepting struct {
	srv      *server.Server
	buf      *pending.Buffer
	jr       *journal.Journal // nil with COUNTERD_JOURNAL=false
	maxBytes int64            // COUNTERD_JOURNAL_MAX_BYTES; 0 is no limit
	socket   string
}

// check returns nil while increments are accepted, else every reason
// they are not.
func (a accepting) check() error {
	var errs []error
	if err := a.srv.Accepting(); err != nil {
		errs = append(errs, fmt.Errorf("socket: %w", err))
	} else if fi, err := os.Lstat(a.socket); err != nil || fi.Mode().Type() != os.ModeSocket {
		// Removed under the daemon (a tmp cleaner): clients cannot
		// connect, though the listener still runs.
		errs = append(errs, fmt.Errorf("socket %s is gone from its path; restart counterd", a.socket))
	}
	if err := a.journal(); err != nil {
		errs = append(errs, err)
	}
	if n, limit := int64(a.buf.PendingKeys()), a.buf.MaxPendingKeys(); n >= limit {
		errs = append(errs, fmt.Errorf("new keys refused (-BUSY): %d keys pending, COUNTERD_MAX_PENDING_KEYS is %d", n, limit))
	}
	return joinReasons(errs)
}

// journal says why journal appends are refused: the journal at
// COUNTERD_JOURNAL_MAX_BYTES (nothing can be appended, or the last
// refused record still does not fit), or the last append failed (a full
// disk) and none succeeded since.
func (a accepting) journal() error {
	if a.jr == nil {
		return nil
	}
	used := a.jr.Bytes()
	r := a.buf.JournalRefused()
	switch {
	case a.maxBytes > 0 && (used >= a.maxBytes || r != nil && errors.Is(r.Err, journal.ErrFull) && used+int64(r.Bytes) > a.maxBytes):
		since := ""
		if r != nil {
			since = fmt.Sprintf(" since %s", r.Since.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("journal full (increments refused with -BUSY%s): %d bytes not yet committed, COUNTERD_JOURNAL_MAX_BYTES is %d; rounds must commit to free it", since, used, a.maxBytes)
	case r != nil && !errors.Is(r.Err, journal.ErrFull):
		return fmt.Errorf("journal writes failing since %s: %w", r.Since.UTC().Format(time.RFC3339), r.Err)
	}
	return nil
}

// joinReasons joins errs on one line ("; "), as /readyz's text is.
func joinReasons(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	err := errs[0]
	for _, e := range errs[1:] {
		err = fmt.Errorf("%w; %w", err, e)
	}
	return err
}
