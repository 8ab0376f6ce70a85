package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/change"
)

// Options configure a Manager.
type Options struct {
	// Holder names this daemon's leases: its journal's instance id,
	// stable across restarts. Empty (no journal) means no leases: every
	// TAKE is a direct conditional update, since a grant from a lease
	// must be journaled before its reply.
	Holder string
	// Record journals one grant and returns a function that waits until
	// it is as durable as the journal promises. It is called with the
	// key's lock held, so it must not block on the database.
	Record func(change.Change) (wait func(context.Context) error, err error)
	// Replayed returns once every grant of an earlier run's journal
	// (the rounds replayed at start) is recorded in PostgreSQL.
	Replayed func(context.Context) error
	// KeepEarlier, when set and true after Replayed, says the earlier
	// run's journal may not be the whole story (this run took its
	// instance over from a daemon that stopped heartbeating, elsewhere):
	// its leases are not returned but left to expire and be forfeited,
	// since they may cover grants this run never saw.
	KeepEarlier func() bool
	// TTL is COUNTERD_LEASE_TTL (default 30s).
	TTL time.Duration
	// Interval is the flush interval: leases aim at one interval of
	// demand, and the manager's housekeeping runs this often.
	Interval time.Duration
	// IdleReturn is how long a lease may go unused before it is returned
	// (default max(1s, 10 intervals)).
	IdleReturn time.Duration
	// Now is the clock (time.Now when nil); tests inject one.
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Set
}

// Manager owns this daemon's leases and NEXT ranges.
type Manager struct {
	st   Backend
	opts Options

	mu   sync.RWMutex
	keys map[string]*budgetKey
	seqs map[string]*seqKey
	// unreturned holds lease ids and units whose return failed, for the
	// next tick to retry.
	unreturned [2][]int64
	// lost holds the requests of leases whose reply never came (see
	// returnLost), oldest first.
	lost []int64

	ready atomic.Bool // the journal replay is recorded and old leases returned
	// keptEarlier says an earlier run's leases were left to expire
	// (Options.KeepEarlier); set before ready, read after it.
	keptEarlier bool
	closed      atomic.Bool
	fetches     sync.WaitGroup
	m           managerMetrics
}

// budgetKey is one budget's leases in this daemon.
type budgetKey struct {
	name string

	mu      sync.Mutex
	leases  []*lease      // oldest first
	fetch   chan struct{} // non-nil while a lease is being taken
	low     time.Time     // until then the remainder is too small to lease
	taken   int64         // units asked since the last tick
	rate    float64       // units per second, smoothed
	lastUse time.Time
	prev    int64 // size of the last lease taken
	prevAt  time.Time
}

// lease is a share of a budget in hand.
type lease struct {
	id       int64
	avail    int64     // units not granted yet
	deadline time.Time // grant only before it
}

// New returns a Manager. Run must run for leases to be used.
func New(st Backend, opts Options) *Manager {
	if opts.TTL <= 0 {
		opts.TTL = 30 * time.Second
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.IdleReturn <= 0 {
		opts.IdleReturn = max(time.Second, 10*opts.Interval)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	m := &Manager{st: st, opts: opts, keys: map[string]*budgetKey{}, seqs: map[string]*seqKey{}}
	m.m = newManagerMetrics(opts.Metrics)
	return m
}

// ErrUnavailable wraps a TAKE or NEXT that could not be served: the lease
// or range in hand is used up and PostgreSQL did not answer.
var ErrUnavailable = errors.New("budget unavailable")

// ErrLeasesNotReturned is a TAKE the unleased remainder could not cover
// while this daemon's leases of an earlier run are not returned yet (its
// replayed journal is not recorded, Manager.Ready): those leases may hold
// the units, so 0, sold out, is not known yet. Nothing was granted, and
// the same TAKE may be sent again.
var ErrLeasesNotReturned = errors.New("budget leases of an earlier run are not returned yet")

// NotDurableError is a TAKE granted and journaled whose durability was not
// confirmed: the grant stands and will be recorded.
type NotDurableError struct{ Err error }

func (e *NotDurableError) Error() string {
	return "grant journaled but not confirmed durable: " + e.Err.Error()
}
func (e *NotDurableError) Unwrap() error { return e.Err }

// Add adds n to budget key (BUDGET key n) and returns the new remainder.
func (m *Manager) Add(ctx context.Context, key string, n int64) (int64, error) {
	return m.st.Add(ctx, key, n)
}

// Read returns budget key's totals as PostgreSQL has them (BUDGET key).
func (m *Manager) Read(ctx context.Context, key string) (Totals, error) { return m.st.Read(ctx, key) }

// Take grants n units of budget key or none (TAKE key n): it returns n
// or 0, or an error when it cannot tell (the database is down and the
// lease in hand cannot cover n: ErrUnavailable; leases of an earlier run
// not returned yet: ErrLeasesNotReturned).
func (m *Manager) Take(ctx context.Context, key string, n int64) (int64, error) {
	if n < 1 {
		return 0, errors.New("units must be at least 1")
	}
	if m.opts.Holder == "" || m.closed.Load() {
		return m.direct(ctx, key, n)
	}
	if !m.ready.Load() {
		return m.recovering(ctx, key, n)
	}
	k := m.key(key)
	k.mu.Lock()
	k.taken += n
	k.lastUse = m.opts.Now()
	k.mu.Unlock()
	for {
		k.mu.Lock()
		now := m.opts.Now()
		if l := k.find(n, now); l != nil {
			return m.grant(ctx, k, l, n, now) // unlocks
		}
		if now.Before(k.low) {
			k.mu.Unlock()
			return m.directOrPool(ctx, k, n)
		}
		if ch := k.fetch; ch != nil {
			k.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return 0, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
			}
		}
		w := want(n, k.rate, m.opts.Interval, k.prev, now.Sub(k.prevAt))
		k.fetch = make(chan struct{})
		k.mu.Unlock()
		got, err := m.acquire(ctx, k, w, leaseFloor(n))
		if err != nil {
			return 0, fmt.Errorf("%w: lease in hand used up and %w", ErrUnavailable, err)
		}
		if !got {
			return m.directOrPool(ctx, k, n)
		}
	}
}

// directOrPool is TAKE near zero: the conditional update, and, if the
// unleased remainder is short while this daemon's leases hold units that
// no single lease has enough of for n, those units returned and the
// update tried once more. So no unit is left unsold in fragments.
func (m *Manager) directOrPool(ctx context.Context, k *budgetKey, n int64) (int64, error) {
	got, err := m.direct(ctx, k.name, n)
	if got != 0 || err != nil {
		return got, err
	}
	var ids, units []int64
	k.mu.Lock()
	for _, l := range k.leases {
		if l.avail > 0 {
			ids, units = append(ids, l.id), append(units, l.avail)
			l.avail = 0
		}
	}
	k.leases = nil
	k.mu.Unlock()
	if len(ids) == 0 {
		return 0, nil
	}
	if err := m.st.GiveBack(ctx, ids, units); err != nil {
		m.mu.Lock()
		m.unreturned[0], m.unreturned[1] = append(m.unreturned[0], ids...), append(m.unreturned[1], units...)
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var sum int64
	for _, u := range units {
		sum += u
	}
	m.m.returnedUnits.Add(int(sum))
	return m.direct(ctx, k.name, n)
}

// find returns the oldest lease that can grant n now. k.mu is held.
func (k *budgetKey) find(n int64, now time.Time) *lease {
	for _, l := range k.leases {
		if l.avail >= n && now.Before(l.deadline) {
			return l
		}
	}
	return nil
}

// grant takes n from l, journals the grant and, once it is durable,
// replies n. k.mu is held and is released.
func (m *Manager) grant(ctx context.Context, k *budgetKey, l *lease, n int64, now time.Time) (int64, error) {
	l.avail -= n
	wait, err := m.opts.Record(change.Change{Key: k.name, Kind: change.Grant, Bucket: l.id, Delta: n})
	if err != nil {
		l.avail += n // nothing was journaled
		k.mu.Unlock()
		return 0, fmt.Errorf("journal grant: %w", err)
	}
	m.prefetch(k, now)
	k.mu.Unlock()
	m.m.grants.Inc()
	if err := wait(ctx); err != nil {
		return n, &NotDurableError{Err: err}
	}
	return n, nil
}

// prefetch takes the next lease in the background once the leases in
// hand hold less than half of what the key's demand wants, so takers do
// not wait for the database. k.mu is held.
func (m *Manager) prefetch(k *budgetKey, now time.Time) {
	if k.fetch != nil || now.Before(k.low) || m.closed.Load() {
		return
	}
	var avail int64
	for _, l := range k.leases {
		if now.Before(l.deadline) {
			avail += l.avail
		}
	}
	w := want(1, k.rate, m.opts.Interval, k.prev, now.Sub(k.prevAt))
	if avail >= w/2 || avail >= maxLease {
		return
	}
	k.fetch = make(chan struct{})
	m.fetches.Add(1)
	go func() {
		defer m.fetches.Done()
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.TTL/3)
		defer cancel()
		if _, err := m.acquire(ctx, k, w, minLease); err != nil {
			m.opts.Logger.Debug("prefetch lease", "key", k.name, "err", err)
		}
	}()
}

// acquire takes one lease of w units (at least floor) for k, whose fetch
// channel the caller set, and reports whether it got one. A remainder too
// small to lease makes the key go direct for one interval.
func (m *Manager) acquire(ctx context.Context, k *budgetKey, w, floor int64) (bool, error) {
	sent := m.opts.Now()
	request := rand.Int64()
	id, size, err := m.st.Lease(ctx, k.name, m.opts.Holder, request, w, floor, m.opts.TTL)
	k.mu.Lock()
	defer k.mu.Unlock()
	close(k.fetch)
	k.fetch = nil
	switch {
	case err != nil:
		if notSent(err) {
			// Nothing reached PostgreSQL, so nothing was leased; an
			// outage's refused attempts must not push a lost lease out
			// of the bounded list.
			return false, err
		}
		// PostgreSQL may have leased and lost only the reply: the next
		// tick looks for the lease and returns it.
		m.mu.Lock()
		m.lost = append(m.lost, request)
		if len(m.lost) > maxLost {
			m.lost = m.lost[len(m.lost)-maxLost:]
		}
		m.mu.Unlock()
		return false, err
	case size == 0:
		k.low = m.opts.Now().Add(m.opts.Interval)
		return false, nil
	}
	// The database's expiry is its now() at the statement plus TTL, never
	// before sent + TTL: the daemon stops granting first.
	k.leases = append(k.leases, &lease{id: id, avail: size, deadline: sent.Add(m.opts.TTL)})
	k.prev, k.prevAt = size, sent
	m.m.leases.Inc()
	m.m.leasedUnits.Add(int(size))
	return true, nil
}

// direct is TAKE as one conditional update in PostgreSQL.
func (m *Manager) direct(ctx context.Context, key string, n int64) (int64, error) {
	ok, err := m.update(ctx, key, n)
	if err != nil {
		return 0, err
	}
	if !ok {
		m.m.refused.Inc()
		return 0, nil
	}
	return n, nil
}

// update runs the conditional update and reports whether it granted n.
func (m *Manager) update(ctx context.Context, key string, n int64) (bool, error) {
	m.m.direct.Inc()
	ok, err := m.st.Take(ctx, key, n)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return ok, nil
}

// recovering is TAKE before this daemon's leases of an earlier run are
// returned (Run's recovery waits for its replayed journal to be
// recorded): the conditional update, as TAKE without leases. If it
// refuses, units leased or forfeited may be the earlier run's, which
// come back to the remainder once recovered; while they could cover n,
// the answer is ErrLeasesNotReturned, not 0 (a restarted daemon answered
// 0 for as long as its replay took, while units remained).
func (m *Manager) recovering(ctx context.Context, key string, n int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		ok, err := m.update(ctx, key, n)
		if err != nil {
			return 0, err
		}
		if ok {
			return n, nil
		}
		t, err := m.st.Read(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		switch {
		case m.ready.Load():
			// Recovered meanwhile: the remainder read may be from before.
			return m.Take(ctx, key, n)
		case t.Remaining >= n && attempt < 2:
			continue // returned or added since the update refused
		case t.Remaining+t.Leased+t.Forfeited >= n:
			m.m.unreturned.Inc()
			return 0, ErrLeasesNotReturned
		}
		// Even every unit out in leases could not cover n.
		m.m.refused.Inc()
		return 0, nil
	}
}

func (m *Manager) key(name string) *budgetKey {
	m.mu.RLock()
	k := m.keys[name]
	m.mu.RUnlock()
	if k != nil {
		return k
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k = m.keys[name]
	if k == nil {
		k = &budgetKey{name: name}
		m.keys[name] = k
	}
	return k
}
