package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
)

// setReply is one SADD or SREM of one member as a client saw it: when it
// was sent and when its reply came, and the reply.
type setReply struct {
	add        bool
	n          int64 // the reply: 1 if it added (removed) the member, else 0
	sent, came time.Time
}

// setLog records, per key and member, the replies to single-member SADD
// and SREM, and per key the net of every reply (multi-member commands
// too).
type setLog struct {
	mu  sync.Mutex
	ops map[[2]string][]setReply
	net map[string]int64
}

func newSetLog() *setLog {
	return &setLog{ops: map[[2]string][]setReply{}, net: map[string]int64{}}
}

func (l *setLog) record(key, member string, r setReply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if member != "" {
		l.ops[[2]string{key, member}] = append(l.ops[[2]string{key, member}], r)
	}
	if r.add {
		l.net[key] += r.n
	} else {
		l.net[key] -= r.n
	}
}

// checkMember checks a member's replies against its final membership
// (is): the replies net to it (each SADD that replied 1 added it, each
// SREM that replied 1 removed it, so they alternate from "not a member"),
// and they alternate in real time: between two SADDs that replied 1, one
// finished before the other was sent, an SREM that replied 1 overlaps the
// time between them (the member cannot be added twice without a removal
// in between), and the same for SREMs.
func checkMember(t *testing.T, key, member string, ops []setReply, is int64) {
	t.Helper()
	var net int64
	var done []setReply // the operations that did something
	for _, o := range ops {
		if o.n != 0 && o.n != 1 {
			t.Errorf("%s %s: a reply of %d to a single-member command", key, member, o.n)
		}
		if o.n == 1 {
			done = append(done, o)
			if o.add {
				net++
			} else {
				net--
			}
		}
	}
	if net != is {
		t.Errorf("%s %s: replies net %d (%d operations, %d did something); the member is %d now", key, member, net, len(ops), len(done), is)
	}
	for _, a := range done {
		for _, b := range done {
			if a.add != b.add || !a.came.Before(b.sent) {
				continue
			}
			between := slices.ContainsFunc(done, func(c setReply) bool {
				return c.add != a.add && c.sent.Before(b.came) && c.came.After(a.sent)
			})
			if !between {
				t.Errorf("%s %s: two operations (add %v) replied 1, the first done at %v before the second was sent at %v, and none of the other kind replied 1 in between",
					key, member, a.add, a.came.Format(time.StampMicro), b.sent.Format(time.StampMicro))
			}
		}
	}
}

// checkSets checks every key's cardinality: SCARD through each daemon,
// the member rows and counter_totals agree, and equal the net of the
// replies.
func checkSets(t *testing.T, db *pgtest.DB, ds []*daemon, keys []string, net map[string]int64) {
	t.Helper()
	for _, k := range keys {
		rows, tot := setRows(t, db, k), total(t, db, k)
		if rows != tot || rows != net[k] {
			t.Errorf("%s: %d member rows, counter_totals %d, replies net %d; want all equal", k, rows, tot, net[k])
		}
		for i, d := range ds {
			if got := reply(t, client(t, d.socket), "SCARD", k); got != strconv.FormatInt(rows, 10) {
				t.Errorf("%s: SCARD through daemon %d: %s; want %d", k, i, got, rows)
			}
		}
	}
}

// isMember reads through c whether member is in key's set.
func isMember(t *testing.T, c *redis.Client, key, member string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), "SISMEMBER", key, member).Int64()
	if err != nil {
		t.Fatalf("SISMEMBER %s %s: %v", key, member, err)
	}
	return n
}

// Toggles under fire: two daemons on one database, four clients each,
// toggle the same few members of three hot keys at once, a bounded count
// of commands each: SADD and SREM of one member, the same SADD sent again
// at once (a retry), pipelines of them, and SADD/SREM of several members
// (on a fourth key). Every reply is what its round decided in commit
// order across both daemons, so: each key's SCARD (through either
// daemon), member rows and counter_totals agree and equal the net of the
// replies; each member's replies net to its final membership, and two
// operations of a kind that replied 1 have one of the other kind that
// replied 1 in between.
func TestSetsTogglesUnderFire(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	// One daemon with the event loops, one with a goroutine a connection:
	// both fast paths of a pipeline's set operations.
	ds := []*daemon{
		startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms", "COUNTERD_FLUSH_TIMEOUT=2m"),
		startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms", "COUNTERD_FLUSH_TIMEOUT=2m", "COUNTERD_IO=goroutines"),
	}
	hot := []string{"post:1:likes", "post:2:likes", "post:3:likes"}
	const multiKey = "post:4:likes" // several members a command
	const members, clients, commands = 4, 4, 40
	member := func(r *rand.Rand) string { return "user:" + strconv.Itoa(r.IntN(members)) }
	log := newSetLog()
	ctx := context.Background()

	var wg sync.WaitGroup
	for di, d := range ds {
		for ci := range clients {
			c := client(t, d.socket)
			r := rand.New(rand.NewPCG(uint64(di), uint64(ci)))
			wg.Go(func() {
				one := func(add bool, key, m string) bool {
					cmd := "SREM"
					if add {
						cmd = "SADD"
					}
					sent := time.Now()
					n, err := c.Do(ctx, cmd, key, m).Int64()
					if err != nil {
						t.Errorf("%s %s %s: %v", cmd, key, m, err)
						return false
					}
					log.record(key, m, setReply{add: add, n: n, sent: sent, came: time.Now()})
					return true
				}
				for range commands {
					key := hot[r.IntN(len(hot))]
					switch x := r.IntN(10); {
					case x < 4: // one operation
						if !one(r.IntN(2) == 0, key, member(r)) {
							return
						}
					case x < 6: // an SADD and its retry
						m := member(r)
						if !one(true, key, m) || !one(true, key, m) {
							return
						}
					case x < 8: // a pipeline
						pipe := c.Pipeline()
						type op struct {
							add    bool
							key, m string
							cmd    *redis.Cmd
						}
						var ops []op
						for range 2 + r.IntN(5) {
							o := op{add: r.IntN(2) == 0, key: hot[r.IntN(len(hot))], m: member(r)}
							name := "SREM"
							if o.add {
								name = "SADD"
							}
							o.cmd = pipe.Do(ctx, name, o.key, o.m)
							ops = append(ops, o)
						}
						sent := time.Now()
						if _, err := pipe.Exec(ctx); err != nil {
							t.Errorf("pipeline: %v", err)
							return
						}
						came := time.Now()
						for _, o := range ops {
							n, err := o.cmd.Int64()
							if err != nil {
								t.Errorf("%v in a pipeline: %v", o.cmd.Args(), err)
								return
							}
							log.record(o.key, o.m, setReply{add: o.add, n: n, sent: sent, came: came})
						}
					default: // several members (the slow path), on their own key
						add := r.IntN(2) == 0
						args := []any{"SREM", multiKey}
						if add {
							args[0] = "SADD"
						}
						for range 1 + r.IntN(members) {
							args = append(args, member(r))
						}
						n, err := c.Do(ctx, args...).Int64()
						if err != nil || n < 0 || n > int64(len(args)-2) {
							t.Errorf("%v: %d, %v", args, n, err)
							return
						}
						log.record(multiKey, "", setReply{add: add, n: n})
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	checkSets(t, db, ds, append(slices.Clone(hot), multiKey), log.net)
	for _, k := range hot {
		for j := range members {
			m := "user:" + strconv.Itoa(j)
			is := isMember(t, client(t, ds[0].socket), k, m)
			if other := isMember(t, client(t, ds[1].socket), k, m); other != is {
				t.Errorf("SISMEMBER %s %s: %d through one daemon, %d through the other", k, m, is, other)
			}
			checkMember(t, k, m, log.ops[[2]string{k, m}], is)
		}
	}
	var n int
	for _, ops := range log.ops {
		n += len(ops)
	}
	t.Logf("%d single-member operations on %d members of %d keys", n, len(log.ops), len(hot))
}

// setOutcome is what a client knows of its own members: the last
// operation accepted (replied, or TIMEOUT: journaled) on each.
type setOutcome map[string]bool

// sendSetOp sends SADD (add) or SREM of key's members ms through c and
// records that each member's last operation is this one: its reply must
// be an integer or -TIMEOUT (journaled, reply lost), and with down
// -TIMEOUT; either way it was accepted.
func sendSetOp(t *testing.T, c *redis.Client, down bool, last setOutcome, add bool, key string, ms ...string) {
	t.Helper()
	args := []any{"SREM", key}
	if add {
		args[0] = "SADD"
	}
	for _, m := range ms {
		args = append(args, m)
	}
	err := c.Do(context.Background(), args...).Err()
	checkSetReply(t, args, err, down)
	for _, m := range ms {
		last[key+" "+m] = add
	}
}

// checkSetReply checks an SADD or SREM's reply (err: its error): an
// integer, or -TIMEOUT (journaled, will be applied, reply lost), which is
// the only reply with the database down. (Up, a commit slower than
// COUNTERD_FLUSH_TIMEOUT on a loaded machine replies -TIMEOUT too.)
func checkSetReply(t *testing.T, args []any, err error, down bool) {
	t.Helper()
	switch {
	case err == nil && down:
		t.Errorf("%v with the database down: an integer reply; want -TIMEOUT", args)
	case err != nil && !strings.HasPrefix(err.Error(), "TIMEOUT "):
		t.Errorf("%v: %v; want an integer or -TIMEOUT (journaled)", args, err)
	}
}

// sendSetPipeline sends a pipeline of single-member operations (adds[i]
// on kms[i], a key and a member) and records them as sendSetOp does.
func sendSetPipeline(t *testing.T, c *redis.Client, down bool, last setOutcome, adds []bool, kms [][2]string) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, len(kms))
	for i, km := range kms {
		name := "SREM"
		if adds[i] {
			name = "SADD"
		}
		cmds[i] = pipe.Do(ctx, name, km[0], km[1])
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		checkSetReply(t, cmd.Args(), cmd.Err(), down)
		last[kms[i][0]+" "+kms[i][1]] = adds[i]
	}
}

// A daemon takes SADD and SREM while PostgreSQL is down: each replies
// -TIMEOUT (journaled, will be applied, reply lost) after
// COUNTERD_FLUSH_TIMEOUT. Once the database is back every one of them is
// applied once, in accept order: each member is as its last operation
// left it, and each key's SCARD, member rows and counter_totals agree.
// Then a second outage, the daemon killed -9 during it with the
// operations journaled and not committed: the restarted daemon replays
// them once, and a second kill and replay changes nothing.
func TestSetsOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	db := pgtest.New(t, pgtest.Options{URL: srv.URL})
	d := startDaemon(t, db, "COUNTERD_FLUSH_INTERVAL=20ms", "COUNTERD_FLUSH_TIMEOUT=1s")
	keys := []string{"post:1:likes", "post:2:likes"}
	const conns = 3
	// Each connection toggles members of its own, so the last operation
	// accepted on a member is known.
	lasts := make([]setOutcome, conns)
	for i := range lasts {
		lasts[i] = setOutcome{}
	}
	mine := func(ci, j int) string { return fmt.Sprintf("c%d:user:%d", ci, j) }
	// round sends, on each connection at once: a pipeline toggling its
	// members of each key, with an SADD sent twice (a retry), then an
	// SREM of two members and an SADD of three (the slow path); step
	// varies which members. Each command waits for its commit at most
	// COUNTERD_FLUSH_TIMEOUT.
	round := func(down bool, step int) {
		var wg sync.WaitGroup
		for ci := range conns {
			c := client(t, d.socket)
			last := lasts[ci]
			wg.Go(func() {
				var adds []bool
				var kms [][2]string
				for _, k := range keys {
					for j, add := range []bool{step%2 == 0, step%2 == 1, true, false} {
						adds, kms = append(adds, add), append(kms, [2]string{k, mine(ci, j)})
					}
					retry := [2]string{k, mine(ci, step%4)}
					adds, kms = append(adds, true, true), append(kms, retry, retry)
				}
				sendSetPipeline(t, c, down, last, adds, kms)
				for _, k := range keys {
					sendSetOp(t, c, down, last, false, k, mine(ci, (step+1)%4), mine(ci, 4))
				}
				sendSetOp(t, c, down, last, true, keys[step%2], mine(ci, 4), mine(ci, 5), mine(ci, (step+2)%4))
			})
		}
		wg.Wait()
	}
	check := func(when string) {
		t.Helper()
		flush(t, d.socket)
		c := client(t, d.socket)
		want := map[string]int64{}
		for _, last := range lasts {
			for km, add := range last {
				k, m, _ := strings.Cut(km, " ")
				is := int64(0)
				if add {
					is = 1
					want[k]++
				}
				if got := isMember(t, c, k, m); got != is {
					t.Errorf("%s: SISMEMBER %s %s: %d; want %d (its last operation)", when, k, m, got, is)
				}
			}
		}
		checkSets(t, db, []*daemon{d}, keys, want)
		if t.Failed() {
			t.FailNow()
		}
	}

	round(false, 0)
	check("before the outage")

	srv.Stop("immediate")
	round(true, 1)
	round(true, 2)
	srv.Start()
	check("after the outage")

	srv.Stop("immediate")
	round(true, 3)
	d.kill()
	srv.Start()
	d.restart()
	check("after the outage and a kill -9")
	d.kill()
	d.restart()
	check("after a second kill -9 and replay")
}
