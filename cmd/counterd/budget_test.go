package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// budgetClient is a connection that never retries a command by itself: a
// TAKE resent after a lost reply could be granted twice.
func budgetClient(t testing.TB, socket string) *redis.Client {
	t.Helper()
	// A reply that waits past ReadTimeout is lost (granted or not, the
	// test cannot tell): a minute, so a loaded machine loses none.
	c := logTo(t, redis.NewClient(&redis.Options{Network: "unix", Addr: socket, Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second, ReadTimeout: time.Minute}))
	t.Cleanup(func() { c.Close() })
	return c
}

type budgetRow struct{ remaining, granted, leased, forfeited, total int64 }

func readBudget(t testing.TB, url, key string) budgetRow {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var b budgetRow
	if err := conn.QueryRow(ctx, `SELECT remaining, granted, leased, forfeited, total FROM budget_totals WHERE key = $1`, key).
		Scan(&b.remaining, &b.granted, &b.leased, &b.forfeited, &b.total); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBudgetCommands(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db)
	c := budgetClient(t, d.socket)
	ctx := context.Background()
	do := func(want string, args ...any) {
		t.Helper()
		got, err := c.Do(ctx, args...).Result()
		s := fmt.Sprint(got)
		if err != nil {
			s = "error: " + err.Error()
		}
		if !strings.HasPrefix(s, want) {
			t.Errorf("%v: %s; want %s", args, s, want)
		}
	}
	do("[0 0 0]", "BUDGET", "gift")
	do("1000", "BUDGET", "gift", 1000)
	do("10", "TAKE", "gift", 10)
	do("1", "TAKE", "gift")
	do("0", "TAKE", "gift", 2000) // all or nothing
	do("error: ERR units must be", "TAKE", "gift", 0)
	do("error: ERR cannot add -2000 to budget", "BUDGET", "gift", -2000)
	// Past int64: a clear refusal, not PostgreSQL's "bigint out of range".
	do("error: ERR cannot add 9223372036854775807 to budget: the total would pass 9223372036854775807", "BUDGET", "gift", int64(math.MaxInt64))
	do("0", "GET", "gift") // a counter of the same name is another key
	do("1", "NEXT", "ticket")
	do("2", "NEXT", "ticket")
	do("1", "NEXT", "other")
	do("OK", "MULTI")
	do("error: ERR BUDGET, TAKE and NEXT are not allowed inside MULTI", "TAKE", "gift")
	do("error: EXECABORT", "EXEC")
	do("OK", "FLUSH")
	b := readBudget(t, db.URL, "gift")
	if b.granted+b.leased+b.remaining != 1000 || b.granted != 11 {
		t.Errorf("after FLUSH: %+v; want 11 granted of 1000", b)
	}
	d.stop()
	if b := readBudget(t, db.URL, "gift"); b != (budgetRow{remaining: 989, granted: 11, total: 1000}) {
		t.Errorf("after SIGTERM: %+v; want the lease returned: 989 remaining, 11 granted", b)
	}
}

// takers is a load of TAKE key 1 from many clients over several daemons.
type takers struct {
	key      string
	total    int64
	acked    atomic.Int64 // replies of 1, and TIMEOUT replies (the grant stands)
	unknown  atomic.Int64 // connection lost with a TAKE in flight: maybe granted
	errs     atomic.Int64 // -ERR replies: not granted
	lastErr  atomic.Value // string: the last lost reply or -ERR, for failures
	lastAck  atomic.Int64 // unix nanoseconds
	overflow atomic.Bool
	mu       sync.Mutex
	resumed  chan struct{} // while paused, closed by resume; nil when not paused
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startTakers(t *testing.T, key string, total int64, sockets []string, clients int) *takers {
	l := &takers{key: key, total: total, stop: make(chan struct{})}
	l.lastAck.Store(time.Now().UnixNano())
	for i := range clients {
		c := budgetClient(t, sockets[i%len(sockets)])
		if i%2 == 1 {
			l.wg.Go(func() { l.runPipelined(c, 8) })
			continue
		}
		l.wg.Go(func() { l.run(c) })
	}
	return l
}

// runPipelined sends TAKEs depth at a time, as a pipelining client does:
// a lease then grants them all in one journal append.
func (l *takers) runPipelined(c *redis.Client, depth int) {
	ctx := context.Background()
	for l.next() {
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range depth {
				p.Do(ctx, "TAKE", l.key)
			}
			return nil
		})
		if err != nil && len(cmds) > 0 && isConnError(cmds[0].Err()) {
			if strings.Contains(cmds[0].Err().Error(), "connect:") {
				time.Sleep(5 * time.Millisecond) // the daemon is down: nothing was sent
			} else {
				l.unknown.Add(int64(depth))
				l.lastErr.Store(cmds[0].Err().Error())
			}
			continue
		}
		for _, cmd := range cmds {
			n, err := cmd.(*redis.Cmd).Int64()
			var rerr redis.Error
			switch {
			case err == nil && n == 1:
				if l.acked.Add(1) > l.total {
					l.overflow.Store(true)
				}
				l.lastAck.Store(time.Now().UnixNano())
			case err == nil:
			case errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "TIMEOUT"):
				l.acked.Add(1)
			case errors.As(err, &rerr):
				l.errs.Add(1)
				l.lastErr.Store(err.Error())
			default:
				l.unknown.Add(1)
				l.lastErr.Store(err.Error())
			}
		}
	}
}

// isConnError reports whether err is not a reply of the daemon.
func isConnError(err error) bool {
	var rerr redis.Error
	return err != nil && !errors.As(err, &rerr)
}

func (l *takers) run(c *redis.Client) {
	ctx := context.Background()
	for l.next() {
		n, err := c.Do(ctx, "TAKE", l.key).Int64()
		var rerr redis.Error
		switch {
		case err == nil && n == 1:
			if l.acked.Add(1) > l.total {
				l.overflow.Store(true)
			}
			l.lastAck.Store(time.Now().UnixNano())
		case err == nil:
			// 0: exhausted, as this daemon sees it.
		case errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "TIMEOUT"):
			l.acked.Add(1)
		case errors.As(err, &rerr):
			l.errs.Add(1)
			l.lastErr.Store(err.Error())
		case strings.Contains(err.Error(), "connect:"):
			// The daemon is down: the TAKE was never sent.
			time.Sleep(5 * time.Millisecond)
		default:
			// The connection broke (a kill): the reply was lost, or the
			// TAKE never arrived.
			l.unknown.Add(1)
			l.lastErr.Store(err.Error())
			time.Sleep(5 * time.Millisecond) // the daemon is down: do not spin
		}
	}
}

// waitAcks returns once n grants are acknowledged, or fails the test.
func (l *takers) waitAcks(t *testing.T, n int64) {
	t.Helper()
	waitProgress(t, "grants acknowledged", l.acked.Load, n, l)
}

// waitQuiet returns once no grant was acknowledged for quiet: the budget
// is sold out as far as the daemons can tell.
func (l *takers) waitQuiet(t *testing.T, quiet time.Duration) {
	t.Helper()
	for start := time.Now(); time.Since(time.Unix(0, l.lastAck.Load())) < quiet; time.Sleep(20 * time.Millisecond) {
		// Bounded by the budget, not by how fast the machine sells it.
		if time.Since(start) > 10*time.Minute {
			t.Fatal("grants still acknowledged after 10 minutes")
		}
	}
}

// pause holds every taker before its next TAKE until resume.
func (l *takers) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resumed = make(chan struct{})
}

// resume lets paused takers go on.
func (l *takers) resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.resumed)
	l.resumed = nil
}

// next waits out a pause and reports whether a taker goes on: false once
// halted.
func (l *takers) next() bool {
	l.mu.Lock()
	resumed := l.resumed
	l.mu.Unlock()
	if resumed == nil {
		select {
		case <-l.stop:
			return false
		default:
			return true
		}
	}
	select {
	case <-l.stop:
		return false
	case <-resumed:
		return true
	}
}

func (l *takers) halt() {
	close(l.stop)
	l.wg.Wait()
}

// Three daemons and 64 clients take from one budget of 100,000 while
// daemons are killed with SIGKILL (one stays down until its lease is
// forfeited) and PostgreSQL restarts: no more than 100,000 grants are ever
// acknowledged, every acknowledged grant is recorded once, and once every
// daemon has stopped and returned its leases, granted + remaining +
// forfeited = 100,000.
func TestBudgetNeverOverspendsUnderKillsAndOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	db := pgtest.New(t, pgtest.Options{URL: srv.URL, MaxConns: 4})
	const total = 100_000
	if _, err := db.Pool.Exec(context.Background(), `SELECT budget_add('gift', $1)`, total); err != nil {
		t.Fatal(err)
	}
	env := []string{"COUNTERD_LEASE_TTL=2s", "COUNTERD_FLUSH_INTERVAL=50ms", "COUNTERD_FLUSH_TIMEOUT=2s", "COUNTERD_DB_MAX_CONNS=6"}
	ds := make([]*daemon, 3)
	var sockets []string
	for i := range ds {
		ds[i] = startDaemon(t, db, env...)
		sockets = append(sockets, ds[i].socket)
	}
	l := startTakers(t, "gift", total, sockets, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	step := int64(total / 12)
	for i := int64(1); i <= 8; i++ {
		l.waitAcks(t, i*step)
		d := ds[rng.IntN(len(ds))]
		if i == 2 {
			// The daemon that stays down must hold units, or there is
			// nothing to forfeit: a daemon between two leases holds none,
			// and which one that is depends on how the clients raced.
			d = leaseHolder(t, db, "gift", ds)
		}
		d.kill()
		switch i {
		case 2:
			// Stay down until another daemon forfeits the lease (the
			// others' clients wait, so that units remain to sell).
			l.pause()
			if !poll(2*time.Minute, func() bool { return readBudget(t, db.URL, "gift").forfeited > 0 }) {
				t.Logf("killed daemon's log:\n%s", d.log())
				t.Fatalf("no lease forfeited within 2 minutes: %+v", readBudget(t, db.URL, "gift"))
			}
			l.resume()
		case 4:
			// PostgreSQL restarts while the daemons serve from their
			// leases; TAKE errors once a lease is used up.
			srv.Stop("fast")
			errs, acked := l.errs.Load(), l.acked.Load()
			waitFor(t, 2*time.Minute, "TAKE errors while PostgreSQL is down", func() bool { return l.errs.Load() > errs+64 })
			// How many grants the leases in hand still cover depends on
			// how the clients raced them; TestTakeFromLeaseWhileDatabaseDown
			// (internal/budget) checks deterministically that they are
			// used before TAKE errors.
			t.Logf("%d grants while PostgreSQL was down", l.acked.Load()-acked)
			srv.Start()
		}
		d.restart()
	}
	if l.overflow.Load() {
		t.Fatalf("%d grants acknowledged; want at most %d", l.acked.Load(), total)
	}
	// All daemons alive: units in idle or expired leases come back and
	// are sold.
	l.waitQuiet(t, 3*time.Second)
	l.halt()
	acked, unknown := l.acked.Load(), l.unknown.Load()
	for _, d := range ds {
		d.stop()
	}
	b := readBudget(t, db.URL, "gift")
	t.Logf("acknowledged %d, %d replies lost to kills, %d errors; database %+v", acked, unknown, l.errs.Load(), b)
	if acked > total {
		t.Errorf("%d grants acknowledged; want at most %d", acked, total)
	}
	if b.granted+b.remaining+b.forfeited != total || b.leased != 0 {
		t.Errorf("after every daemon stopped: %+v; want granted + remaining + forfeited = %d and nothing leased", b, total)
	}
	if b.granted < acked || b.granted > acked+unknown {
		t.Errorf("granted %d; want the %d acknowledged, plus at most the %d whose reply was lost", b.granted, acked, unknown)
	}
}

// leaseHolder returns the daemon of ds that holds the most units of key
// in a live lease, waiting until one does: a lease's holder is its
// daemon's journal instance, which the daemon logs at start.
func leaseHolder(t *testing.T, db *pgtest.DB, key string, ds []*daemon) *daemon {
	t.Helper()
	ctx := context.Background()
	var found *daemon
	ok := poll(time.Minute, func() bool {
		var holder string
		err := db.Pool.QueryRow(ctx, `SELECT holder FROM budget_leases WHERE key = $1 AND NOT forfeited AND size > 0
			ORDER BY size DESC LIMIT 1`, key).Scan(&holder)
		if err != nil {
			return false // none right now (pgx.ErrNoRows): look again
		}
		for _, d := range ds {
			if strings.Contains(d.log(), "instance="+holder+" ") {
				found = d
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no daemon held units of %s in a live lease within a minute", key)
	}
	return found
}

// stallTimeout is how long a count may stand still before a test gives
// up on it; waitProgress bounds the whole wait at ten of them.
const stallTimeout = time.Minute

// waitProgress polls count until it reaches want. It fails the test when
// the count stands still for stallTimeout, not after a fixed time: a
// loaded machine is slow, and only a stuck one stops. A failure prints
// state.
func waitProgress(t *testing.T, what string, count func() int64, want int64, state ...fmt.Stringer) {
	t.Helper()
	start, last, lastChange := time.Now(), count(), time.Now()
	for n := last; n < want; n = count() {
		switch {
		case n != last:
			last, lastChange = n, time.Now()
		case time.Since(lastChange) > stallTimeout:
			t.Fatalf("%s: %d, unchanged for %v; want %d %v", what, n, stallTimeout, want, state)
		case time.Since(start) > 10*stallTimeout:
			t.Fatalf("%s: %d after %v; want %d %v", what, n, 10*stallTimeout, want, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// String says what the takers saw, for failures.
func (l *takers) String() string {
	last, _ := l.lastErr.Load().(string)
	return fmt.Sprintf("%d acknowledged, %d replies lost, %d errors (last %q)", l.acked.Load(), l.unknown.Load(), l.errs.Load(), last)
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("no %s within %s", what, timeout)
	}
}

// poll reports whether cond held within timeout.
func poll(timeout time.Duration, cond func() bool) bool {
	for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > timeout {
			return false
		}
	}
	return true
}

// With every daemon alive, the budget is sold to the last unit: leases
// shrink near zero, the last units are granted one by one in PostgreSQL,
// and leases of daemons whose clients went away come back.
func TestBudgetSellsOutExactly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	const total = 20_000
	if _, err := db.Pool.Exec(context.Background(), `SELECT budget_add('seats', $1)`, total); err != nil {
		t.Fatal(err)
	}
	ds := []*daemon{startDaemon(t, db), startDaemon(t, db), startDaemon(t, db)}
	all := startTakers(t, "seats", total, []string{ds[0].socket, ds[1].socket, ds[2].socket}, 12)
	all.waitAcks(t, total/2)
	all.halt()
	// Only the first daemon's clients go on: the others' leases must come
	// back to be sold.
	one := startTakers(t, "seats", total-all.acked.Load(), []string{ds[0].socket}, 4)
	if all.unknown.Load() != 0 {
		t.Fatalf("first takers: %v; want no reply lost (nothing is killed)", all)
	}
	// A lease whose renewal missed its deadline (an overloaded machine)
	// is forfeited, never sold again: the budget then sells out short by
	// exactly the forfeited units, which only a failed renewal explains.
	forfeited := func() int64 {
		b := readBudget(t, db.URL, "seats")
		return b.forfeited
	}
	waitProgress(t, "grants acknowledged and units forfeited", func() int64 {
		return all.acked.Load() + one.acked.Load() + forfeited()
	}, total, all, one)
	one.halt()
	if one.overflow.Load() {
		t.Fatalf("%d grants acknowledged; want %d", all.acked.Load()+one.acked.Load(), total)
	}
	flush(t, ds[0].socket)
	body := httpGet(t, "http://"+ds[0].metricsAddr()+"/metrics")
	if !strings.Contains(body, "counterd_budget_direct_takes_total") || strings.Contains(body, "counterd_budget_direct_takes_total 0\n") {
		t.Errorf("no direct TAKE near zero:\n%s", body)
	}
	for _, d := range ds {
		d.stop()
	}
	b := readBudget(t, db.URL, "seats")
	if b.forfeited > 0 {
		renewFailed := false
		for _, d := range ds {
			renewFailed = renewFailed || strings.Contains(d.log(), "renew budget leases")
		}
		if !renewFailed {
			t.Errorf("%d units forfeited with every lease renewed in time", b.forfeited)
		}
		t.Logf("%d units forfeited after a lease renewal missed its deadline (machine overloaded)", b.forfeited)
	}
	if b != (budgetRow{granted: total - b.forfeited, forfeited: b.forfeited, total: total}) || b.granted != all.acked.Load()+one.acked.Load() {
		t.Errorf("sold out: %+v after %d grants acknowledged; want every unit granted or forfeited, and granted as acknowledged", b, all.acked.Load()+one.acked.Load())
	}
}

// NEXT from three daemons hands out every number once, across SIGKILLs.
func TestNextUniqueAcrossKills(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	ds := []*daemon{startDaemon(t, db), startDaemon(t, db), startDaemon(t, db)}
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		got  atomic.Int64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	for i := range 24 {
		c := budgetClient(t, ds[i%3].socket)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := c.Do(context.Background(), "NEXT", "ticket").Int64()
				if err != nil {
					time.Sleep(5 * time.Millisecond) // a daemon is down: pace the retries, do not spin
					continue
				}
				mu.Lock()
				seen[n]++
				mu.Unlock()
				got.Add(1)
			}
		})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := int64(1); i <= 6; i++ {
		waitProgress(t, "numbers handed out", got.Load, i*5000)
		d := ds[rng.IntN(3)]
		d.kill()
		d.restart()
	}
	close(stop)
	wg.Wait()
	for n, times := range seen {
		if times > 1 || n < 1 {
			t.Errorf("number %d handed out %d times", n, times)
		}
	}
	t.Logf("%d numbers, all distinct", len(seen))
}
