package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/counterd/counterd/internal/glob"
	"github.com/counterd/counterd/internal/targets"
)

// Rollup is the rollup job's configuration.
type Rollup struct {
	DatabaseURL string `env:"DATABASE_URL,required,notEmpty" help:"PostgreSQL connection URL, postgres:// or postgresql:// (another scheme is refused), or keyword/value settings naming host or dbname; never logged"`
	// Every minute keeps slot tables small without making the fold itself
	// a noticeable load; the descriptor form accepts "@every 10s" too.
	Schedule string        `env:"ROLLUP_SCHEDULE" envDefault:"@every 1m" help:"robfig/cron schedule: 5 fields, @hourly or @every DURATION (whole seconds, at least 1s)"`
	Chunk    int           `env:"ROLLUP_CHUNK" envDefault:"5000" help:"slot rows folded per transaction"`
	Timeout  time.Duration `env:"ROLLUP_TIMEOUT" envDefault:"5m" help:"longest one pass may take before it is cancelled as failed"`
	// One minute matches the default schedule, so under heavy writes a
	// pass ends about when the next is due, and leaves ROLLUP_TIMEOUT
	// ample room for the chunk in flight and the prune after it.
	MaxPass time.Duration `env:"ROLLUP_MAX_PASS" envDefault:"1m" help:"a pass starts no new chunk after this long and ends successfully, leaving the rest for the next pass (less than ROLLUP_TIMEOUT)"`
	// A 5000-row chunk takes well under a second; 30s only ends a
	// statement that is stuck.
	StatementTimeout time.Duration `env:"ROLLUP_STATEMENT_TIMEOUT" envDefault:"30s" help:"statement_timeout of rollup's database connections (0 keeps the server's; a setting in DATABASE_URL wins)"`
	// The fold skips rows writers hold; waiting 5s for a lock means
	// something holds a whole table, and the next pass can try again.
	LockTimeout time.Duration `env:"ROLLUP_LOCK_TIMEOUT" envDefault:"5s" help:"lock_timeout of rollup's database connections (0 keeps the server's; a setting in DATABASE_URL wins)"`
	// A daemon that comes back later than this with an old journal could
	// replay a round it had already committed; 30 days is far beyond any
	// outage worth surviving that way.
	PruneAfter time.Duration `env:"ROLLUP_PRUNE_AFTER" envDefault:"720h" help:"forget the batch identity of daemon instances idle this long"`
	// A day covers a daemon down overnight with INCRONCE views in its
	// journal; an hour (the old fixed slack) only clock skew. The cost is
	// rows: each entry lives its window plus this.
	SeenSlack time.Duration `env:"ROLLUP_SEEN_SLACK" envDefault:"24h" help:"keep an INCRONCE seen entry this long after its window ends, so a view decided that late (a daemon replaying its journal after an outage, or a clock behind) is still decided against it; a view decided later may count again"`
	// Parsed by internal/targets; checked against the catalog when the
	// rollup starts.
	Targets string `env:"ROLLUP_TARGETS" help:"app columns each fold adds to, separated by ';': pattern=[schema.]table.column, as 'post:{id}:likes=posts.like_count'"`
	Cluster string `env:"ROLLUP_CLUSTER" help:"PL/Proxy cluster declared in the DATABASE_URL database (as COUNTERD_CLUSTER): fold every partition, each on its own, at once; not with ROLLUP_TARGETS"`
	// Exact sets against the app's own membership table (issue 35):
	// operator-provided SQL, run as written, never built from key text.
	SetReconcile string `env:"ROLLUP_SET_RECONCILE" help:"a query over the app's own tables returning (key text, member bytea) rows, one per member of each exact set, as SELECT 'post:' || post_id || ':likes', user_id::text::bytea FROM likes: a pass makes counterd's sets of ROLLUP_SET_RECONCILE_KEYS equal it (counter_set_reconcile) and counts what it repaired; needs ROLLUP_SET_RECONCILE_KEYS"`
	// Also the keys a set is emptied of when the query returns none of
	// them: a key outside is neither read nor touched.
	SetReconcileKeys string `env:"ROLLUP_SET_RECONCILE_KEYS" help:"comma-separated globs (as COUNTERD_SAMPLE_KEYS) of the set keys ROLLUP_SET_RECONCILE covers, as post:*:likes: a key they match that the query returns no row of is emptied; the query's rows of other keys are skipped"`
	// An hour: a reconcile reads the app's whole table, and drift is
	// rare (a lost journal, a hand edit).
	SetReconcileEvery time.Duration `env:"ROLLUP_SET_RECONCILE_EVERY" envDefault:"1h" help:"a scheduled pass reconciles when the last reconcile began at least this long ago (the first pass always; rollup once always); 0: every pass"`
	// A minute covers the daemons' clocks behind the database's, by
	// far more than NTP lets them drift.
	SetReconcileMargin time.Duration `env:"ROLLUP_SET_RECONCILE_MARGIN" envDefault:"1m" help:"the reconcile's as_of is the start of the app's snapshot less this, so an operation accepted by a daemon whose clock is behind the database's by up to this is never undone; a row decided within it is repaired by a later reconcile"`
	SetTombstoneSlack  time.Duration `env:"ROLLUP_SET_TOMBSTONE_SLACK" envDefault:"24h" help:"keep an exact set's row of a removed member (a tombstone) this long, so a reconcile as of an earlier time (ROLLUP_SET_RECONCILE, or the app's own counter_set_reconcile) does not add the member back; at least ROLLUP_SET_RECONCILE_MARGIN plus ROLLUP_TIMEOUT"`
	// Off by default: rollup was a plain cron job before it had metrics,
	// and two of them on one host must not fight over a port.
	MetricsAddr string     `env:"ROLLUP_METRICS_ADDR" envDefault:"off" help:"HTTP address for /metrics and /healthz of the scheduler (off disables)"`
	LogLevel    slog.Level `env:"ROLLUP_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat   string     `env:"ROLLUP_LOG_FORMAT" envDefault:"text" help:"text or json"`
}

// Validate checks the schedule parses and ranges hold.
func (c *Rollup) Validate() error {
	if err := checkSchedule(c.Schedule); err != nil {
		return &Error{"ROLLUP_SCHEDULE", err.Error()}
	}
	if c.Chunk < 1 {
		return &Error{"ROLLUP_CHUNK", "must be at least 1"}
	}
	if c.SeenSlack < 0 {
		return &Error{"ROLLUP_SEEN_SLACK", "must not be negative"}
	}
	if c.PruneAfter <= 0 {
		return &Error{"ROLLUP_PRUNE_AFTER", "must be positive"}
	}
	if c.Timeout <= 0 {
		return &Error{"ROLLUP_TIMEOUT", "must be positive"}
	}
	if c.MaxPass <= 0 || c.MaxPass >= c.Timeout {
		return &Error{"ROLLUP_MAX_PASS", "must be positive and less than ROLLUP_TIMEOUT"}
	}
	if c.StatementTimeout < 0 {
		return &Error{"ROLLUP_STATEMENT_TIMEOUT", "must not be negative"}
	}
	if c.LockTimeout < 0 {
		return &Error{"ROLLUP_LOCK_TIMEOUT", "must not be negative"}
	}
	if _, err := targets.Parse(c.Targets); err != nil {
		return &Error{"ROLLUP_TARGETS", err.Error()}
	}
	if c.Cluster != "" && !identifier(c.Cluster) {
		return &Error{"ROLLUP_CLUSTER", fmt.Sprintf("%q is not a PL/Proxy cluster name (lower-case letters, digits and _, not starting with a digit)", c.Cluster)}
	}
	if c.Cluster != "" && strings.TrimSpace(c.Targets) != "" {
		// A fold into the app's columns commits with the fold of the
		// slot rows, in one transaction; the app's table is not on the
		// partitions, and no transaction spans databases.
		return &Error{"ROLLUP_TARGETS", "cannot be used with ROLLUP_CLUSTER: a fold into the app's columns needs them in the partition's transaction (see docs/scaling.md)"}
	}
	if err := c.validateSets(); err != nil {
		return err
	}
	return validLogFormat("ROLLUP_LOG_FORMAT", c.LogFormat)
}

// validateSets checks the exact sets' settings.
func (c *Rollup) validateSets() error {
	if c.SetTombstoneSlack < 0 {
		return &Error{"ROLLUP_SET_TOMBSTONE_SLACK", "must not be negative"}
	}
	if c.SetReconcileMargin < 0 {
		return &Error{"ROLLUP_SET_RECONCILE_MARGIN", "must not be negative"}
	}
	if c.SetReconcileEvery < 0 {
		return &Error{"ROLLUP_SET_RECONCILE_EVERY", "must not be negative"}
	}
	keys, err := glob.Parse(c.SetReconcileKeys)
	if err != nil {
		return &Error{"ROLLUP_SET_RECONCILE_KEYS", err.Error()}
	}
	query := strings.TrimSpace(c.SetReconcile)
	switch {
	case query == "" && !keys.Empty():
		return &Error{"ROLLUP_SET_RECONCILE_KEYS", "is set without ROLLUP_SET_RECONCILE"}
	case query == "":
		return nil
	case keys.Empty():
		// Without them, a set the app has no row of would never be
		// emptied, and nothing would say so.
		return &Error{"ROLLUP_SET_RECONCILE", "needs ROLLUP_SET_RECONCILE_KEYS: the keys it covers (a key it returns no row of is emptied)"}
	case c.Cluster != "":
		// The app's table is on the proxy's database, the sets on the
		// partitions: not built yet.
		return &Error{"ROLLUP_SET_RECONCILE", "cannot be used with ROLLUP_CLUSTER yet: the app's table and the sets are in different databases"}
	case c.SetTombstoneSlack < c.SetReconcileMargin+c.Timeout:
		return &Error{"ROLLUP_SET_TOMBSTONE_SLACK", fmt.Sprintf("%v is less than ROLLUP_SET_RECONCILE_MARGIN plus ROLLUP_TIMEOUT (%v): a reconcile could add back a member whose removal's tombstone was pruned while it ran",
			c.SetTombstoneSlack, c.SetReconcileMargin+c.Timeout)}
	}
	return nil
}

// checkSchedule accepts what robfig/cron's standard parser accepts, except
// an @every interval it would change without a word: cron runs one below a
// second (0s, -1s and 100ms included) every second and cuts 1.5s to 1s, so
// such an interval is refused rather than run at a rate nobody asked for.
func checkSchedule(spec string) error {
	const want = `want five cron fields, as "*/5 * * * *", or a descriptor: @every 1m, @hourly, @daily`
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return fmt.Errorf("invalid value %q: %v; @every takes a duration such as 30s, 1m or 1h", spec, err)
		}
		if d < time.Second || d%time.Second != 0 {
			return fmt.Errorf("invalid value %q: @every takes whole seconds, at least 1s", spec)
		}
		return nil
	}
	if _, err := cron.ParseStandard(spec); err != nil {
		return fmt.Errorf("invalid value %q: %v; %s", spec, err, want)
	}
	return nil
}
