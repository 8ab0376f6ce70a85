// Package owner fences a journal's instance identity in PostgreSQL: one
// live daemon at a time commits rounds under an instance id.
//
// The one idea to hold first: a daemon's generation (fresh at every start,
// written into every segment it creates) is its fencing token. A daemon
// claims its instance in counterd_owners before it writes any round,
// naming its own generation and the earlier ones it replays from its
// journal (adopted), and every round statement calls counterd_fence, which
// refuses a round of any other generation of a claimed instance. So a copy
// of a journal directory (a volume snapshot, a cloned VM, cp -a) that
// replays its original's open segment cannot commit it as the original:
// either the claim is refused, or, if the copy took over, the original's
// rounds are refused from then on and it stops.
//
// # Claims
//
// The owner heartbeats every TTL/3 (and with every budget lease it takes
// or renews). A claim succeeds when the instance has no owner, when the
// owner released it at a clean stop, when its heartbeat is older than the
// TTL (counted from the database server's start at the earliest, so a
// database restart does not make every owner look dead), or when it is
// provably this directory's previous run: same host, same directory (device
// and inode), same boot, and we hold the directory's lock, so that run is
// gone. A kill -9 and restart in place therefore claims at once. Anything
// else is a live owner: Acquire waits up to one TTL for it to stop
// heartbeating and returns an InUseError if it does not.
//
// # Databases
//
// A journal is bound to the database its rounds belong to (Bind): the
// installation id in counterd_installation (one per schema, made by the
// migration), with the server's system identifier, database and schema
// for the message. A journal holding rounds for one installation refuses
// to replay them into another.
package owner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/version"
)

// ErrInUse is wrapped by Acquire when another live daemon owns the
// instance.
var ErrInUse = errors.New("instance is owned by another live counterd")

// ErrFenced is wrapped by Run when another daemon took the instance over.
var ErrFenced = errors.New("instance was taken over by another counterd")

// Claim describes the run that claims an instance.
type Claim struct {
	// Instance is the journal's instance id.
	Instance string
	// Generation is this run's generation: its fencing token.
	Generation string
	// Adopted are the generations of the journaled rounds this run
	// replays; their rounds may be written by this run too.
	Adopted []string
	// Dir is the journal directory, DirID its device and inode.
	Dir, DirID string
	// Host is the host name, BootID the kernel's boot id ("" if unknown).
	Host, BootID string
	// PID is this process's id.
	PID int
	// Version is this binary's version and Migration its newest
	// migration, shown in counterd_fleet.
	Version   string
	Migration int
}

// ThisRun returns a Claim for this process's journal.
func ThisRun(instance, generation string, adopted []string, dir, dirID string) Claim {
	host, _ := os.Hostname()
	newest, _ := migrate.Newest() // the embedded migrations load, or the daemon had not migrated
	return Claim{
		Instance: instance, Generation: generation, Adopted: adopted,
		Dir: dir, DirID: dirID, Host: host, BootID: bootID(), PID: os.Getpid(),
		Version: version.Version(), Migration: newest.Version,
	}
}

// bootID is the kernel's id of this boot, "" where there is none.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// holder is a row of counterd_owners as Acquire reads it.
type holder struct {
	generation, host, dir, dirID, bootID string
	pid                                  int
	heartbeat, claimed                   time.Time
	released                             bool
	age                                  time.Duration // since the later of the heartbeat and the server's start
}

// InUseError says which live daemon owns the instance.
type InUseError struct {
	Instance string
	Host     string
	PID      int
	Dir      string
	// Heartbeat is the owner's last heartbeat.
	Heartbeat time.Time
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("journal instance %s is in use by another live counterd (pid %d on host %s, journal %s, last heartbeat %s): "+
		"this journal directory is a copy of a running daemon's, or that daemon is still running; "+
		"stop it first, or give this copy its own identity by starting it on an empty journal directory",
		e.Instance, e.PID, e.Host, e.Dir, e.Heartbeat.UTC().Format(time.RFC3339))
}

func (e *InUseError) Unwrap() error { return ErrInUse }

// Owner is a claimed instance.
type Owner struct {
	pool  *pgxpool.Pool
	claim Claim
	ttl   time.Duration
	log   *slog.Logger
	// elsewhere: see Elsewhere.
	elsewhere bool
	// fleet, when set (OnFleet), gets the live daemons counted at every
	// heartbeat.
	fleet func(n int)
	// queued, when set (OnQueued), says at every heartbeat how many
	// rounds this run holds uncommitted.
	queued func() int
}

// OnQueued makes every heartbeat record in counterd_owners how many
// rounds f says this run holds uncommitted (counterd_fleet shows it).
// Call it before Run.
func (o *Owner) OnQueued(f func() int) { o.queued = f }

// OnFleet makes every heartbeat, from the first one Run makes at once,
// also count the live daemons on the database (this one included: the
// instances whose owner heartbeated within the TTL and did not release
// them) and pass the count to f. Call it before Run.
func (o *Owner) OnFleet(f func(n int)) { o.fleet = f }

// Acquire claims c.Instance for this run. A live owner that keeps
// heartbeating makes it return an InUseError within about one ttl; an
// owner that stops is taken over once its heartbeat is ttl old.
func Acquire(ctx context.Context, pool *pgxpool.Pool, c Claim, ttl time.Duration, log *slog.Logger) (*Owner, error) {
	var first *holder
	for {
		h, took, err := tryClaim(ctx, pool, c, ttl)
		if err != nil {
			return nil, fmt.Errorf("claim journal instance %s: %w", c.Instance, err)
		}
		if h == nil {
			o := &Owner{pool: pool, claim: c, ttl: ttl, log: log}
			if took != nil && !took.released && !took.sameRun(c) && took.generation != c.Generation {
				o.elsewhere = true
				log.Warn("took over journal instance from a daemon that stopped heartbeating",
					"instance", c.Instance, "previous_host", took.host, "previous_pid", took.pid, "previous_dir", took.dir,
					"previous_heartbeat", took.heartbeat)
			}
			return o, nil
		}
		if first == nil {
			first = h
			log.Warn("journal instance is owned by another daemon; waiting for its lease to run out",
				"instance", c.Instance, "owner_host", h.host, "owner_pid", h.pid, "owner_dir", h.dir, "lease_left", ttl-h.age)
		} else if h.generation != first.generation || h.heartbeat.After(first.heartbeat) {
			return nil, &InUseError{Instance: c.Instance, Host: h.host, PID: h.pid, Dir: h.dir, Heartbeat: h.heartbeat}
		}
		wait := min(ttl-h.age, ttl/6) + 10*time.Millisecond
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("claim journal instance %s: %w", c.Instance, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// tryClaim claims the instance in one transaction and returns nil, or the
// live owner that holds it.
func tryClaim(ctx context.Context, pool *pgxpool.Pool, c Claim, ttl time.Duration) (live, took *holder, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		live, took = nil, nil
		tag, err := tx.Exec(ctx, `
INSERT INTO counterd_owners (instance, generation, adopted, host, dir, dir_id, boot_id, pid,
                             version, migration, ttl_seconds, reported_generation)
VALUES ($1, $2, coalesce($3::text[], '{}'), $4, $5, $6, $7, $8, nullif($9, ''), nullif($10, 0), $11, $2) ON CONFLICT (instance) DO NOTHING`,
			c.Instance, c.Generation, c.Adopted, c.Host, c.Dir, c.DirID, c.BootID, c.PID, c.Version, c.Migration, ttl.Seconds())
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var h holder
		var ageMS float64
		if err := tx.QueryRow(ctx, `
SELECT generation, host, dir, dir_id, boot_id, pid, heartbeat_at, claimed_at, released,
       extract(epoch FROM now() - greatest(heartbeat_at, pg_postmaster_start_time())) * 1000
FROM counterd_owners WHERE instance = $1 FOR UPDATE`, c.Instance).Scan(
			&h.generation, &h.host, &h.dir, &h.dirID, &h.bootID, &h.pid, &h.heartbeat, &h.claimed, &h.released, &ageMS); err != nil {
			return err
		}
		h.age = time.Duration(ageMS * float64(time.Millisecond))
		if !h.takeable(c, ttl) {
			live = &h
			return nil
		}
		took = &h
		_, err = tx.Exec(ctx, `
UPDATE counterd_owners
SET generation = $2, adopted = coalesce($3::text[], '{}'), host = $4, dir = $5, dir_id = $6, boot_id = $7, pid = $8,
    claimed_at = now(), heartbeat_at = now(), released = false,
    version = nullif($9, ''), migration = nullif($10, 0), ttl_seconds = $11, queued_rounds = NULL, reported_generation = $2
WHERE instance = $1`,
			c.Instance, c.Generation, c.Adopted, c.Host, c.Dir, c.DirID, c.BootID, c.PID, c.Version, c.Migration, ttl.Seconds())
		return err
	})
	return live, took, err
}

// takeable reports whether c may take the instance from h.
func (h *holder) takeable(c Claim, ttl time.Duration) bool {
	switch {
	case h.generation == c.Generation, h.released, h.age >= ttl:
		return true
	}
	return h.sameRun(c)
}

// sameRun reports whether h is c's directory on c's boot: c holds the
// directory's lock, so the run that claimed it is gone.
func (h *holder) sameRun(c Claim) bool {
	return c.BootID != "" && h.bootID == c.BootID && h.host == c.Host && h.dirID == c.DirID
}

// Elsewhere reports whether this run took the instance over from a
// daemon that stopped heartbeating without releasing it, and that was
// not this directory's previous run: that daemon may have acknowledged
// more than this journal holds.
func (o *Owner) Elsewhere() bool { return o.elsewhere }

// Run heartbeats every ttl/3 until ctx ends. It returns an error wrapping
// ErrFenced as soon as another daemon owns the instance; a heartbeat the
// database does not answer is retried at the next tick.
func (o *Owner) Run(ctx context.Context) error {
	t := time.NewTicker(o.ttl / 3)
	defer t.Stop()
	first := o.fleet != nil // count the fleet at once, not a third of the TTL later
	for {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
		first = false
		err := o.beat(ctx)
		if errors.Is(err, ErrFenced) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			o.log.Warn("journal instance heartbeat failed; will retry", "instance", o.claim.Instance, "err", err)
		}
	}
}

func (o *Owner) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.ttl/3)
	defer cancel()
	var beat, others int
	var queued *int
	if o.queued != nil {
		n := o.queued()
		queued = &n
	}
	err := o.pool.QueryRow(ctx, beatSQL, o.claim.Instance, o.claim.Generation, o.ttl.Seconds(), queued).Scan(&beat, &others)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if beat == 0 {
		return o.takenOver(ctx)
	}
	if o.fleet != nil {
		o.fleet(1 + others)
	}
	return nil
}

// beatSQL heartbeats the instance of $1 for generation $2, recording the
// rounds it holds uncommitted ($4, NULL if not reported), and counts the
// other live instances: not released, heartbeated within $3 seconds
// (counterd_fleet's live column is the same rule). The
// count is one index-less scan of a table of one row per daemon ever
// started against the database (pruned with the rollup's instances).
const beatSQL = `
WITH beat AS (
    UPDATE counterd_owners SET heartbeat_at = now(), queued_rounds = $4::integer
    WHERE instance = $1 AND generation = $2
    RETURNING 1
)
SELECT (SELECT count(*) FROM beat)::int,
       (SELECT count(*) FROM counterd_owners
        WHERE instance <> $1 AND NOT released AND heartbeat_at > now() - $3 * interval '1 second')::int`

// takenOver describes who owns the instance now.
func (o *Owner) takenOver(ctx context.Context) error {
	var host, dir string
	var pid int
	err := o.pool.QueryRow(ctx, `SELECT host, dir, pid FROM counterd_owners WHERE instance = $1`, o.claim.Instance).Scan(&host, &dir, &pid)
	if err != nil {
		return fmt.Errorf("%w: journal instance %s", ErrFenced, o.claim.Instance)
	}
	return fmt.Errorf("%w: journal instance %s now belongs to pid %d on host %s (journal %s); this daemon stops writing, and its unflushed rounds stay in its journal",
		ErrFenced, o.claim.Instance, pid, host, dir)
}

// Release gives the instance up at a clean stop, after every round is
// committed, so the next run (anywhere) claims it at once.
func (o *Owner) Release(ctx context.Context) error {
	_, err := o.pool.Exec(ctx, `UPDATE counterd_owners SET released = true, heartbeat_at = now() WHERE instance = $1 AND generation = $2`,
		o.claim.Instance, o.claim.Generation)
	if err != nil {
		return fmt.Errorf("release journal instance %s: %w", o.claim.Instance, err)
	}
	return nil
}
