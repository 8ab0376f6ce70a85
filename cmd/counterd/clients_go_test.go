package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/counterd/counterd/internal/pgtest"
)

// incrCmd is INCR key when by is 1, else INCRBY key by.
type incrCmd struct {
	key string
	by  int64
}

// scenarioClient is one Go library's way to do each step of the scenario.
type scenarioClient interface {
	connect(ctx context.Context) error // connect and PING
	incr(ctx context.Context, key string) (int64, error)
	incrBy(ctx context.Context, key string, by int64) (int64, error)
	get(ctx context.Context, key string) (string, error)
	mget(ctx context.Context, keys ...string) ([]string, error) // "(nil)" for a nil reply
	pipeline(ctx context.Context, cmds []incrCmd) ([]int64, error)
	transaction(ctx context.Context, cmds []incrCmd) ([]int64, error)
	flush(ctx context.Context) (string, error)
}

const (
	stepTimeout = 20 * time.Second
	bigTimeout  = 90 * time.Second
)

// runScenario runs scenarioSteps through c, as testdata/clients/scenario.js
// does for Node libraries.
func runScenario(client, version string, c scenarioClient, prefix string) clientReport {
	rep := clientReport{Client: client, Version: version, Sent: map[string]int64{}}
	k := func(s string) string { return prefix + ":" + s }
	send := func(cmds ...incrCmd) {
		for _, c := range cmds {
			rep.Sent[c.key] += c.by
		}
	}
	step := func(name string, timeout time.Duration, f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r := stepResult{Name: name}
		if err := f(ctx); err != nil {
			r.Error = err.Error()
		}
		rep.Steps = append(rep.Steps, r)
	}
	want := func(what string, got, want any, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s: got %v; want %v", what, got, want)
		}
		return nil
	}
	wantIncrs := func(what string, got []int64, cmds []incrCmd, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if len(got) != len(cmds) {
			return fmt.Errorf("%s: got %d replies; want %d", what, len(got), len(cmds))
		}
		for i, c := range cmds {
			if got[i] != c.by {
				return fmt.Errorf("%s: reply %d to INCRBY %s %d: got %d; want %d", what, i, c.key, c.by, got[i], c.by)
			}
		}
		return nil
	}

	step("connect", stepTimeout, c.connect)
	step("incr", stepTimeout, func(ctx context.Context) error {
		for range 3 {
			send(incrCmd{k("incr"), 1})
			n, err := c.incr(ctx, k("incr"))
			if err := want("INCR", n, 1, err); err != nil {
				return err
			}
		}
		return nil
	})
	step("incrby", stepTimeout, func(ctx context.Context) error {
		for _, by := range []int64{5, -2} {
			send(incrCmd{k("incrby"), by})
			n, err := c.incrBy(ctx, k("incrby"), by)
			if err := want(fmt.Sprintf("INCRBY %d", by), n, by, err); err != nil {
				return err
			}
		}
		return nil
	})
	step("get", stepTimeout, func(ctx context.Context) error {
		v, err := c.get(ctx, k("incr"))
		return want("GET", v, "3", err)
	})
	step("mget", stepTimeout, func(ctx context.Context) error {
		v, err := c.mget(ctx, k("incr"), k("incrby"), k("never"))
		return want("MGET", v, []string{"3", "3", "0"}, err)
	})
	step("pipeline", stepTimeout, func(ctx context.Context) error {
		var cmds []incrCmd
		for range 10 {
			cmds = append(cmds, incrCmd{k("pipeline:a"), 1}, incrCmd{k("pipeline:b"), 2})
		}
		send(cmds...)
		got, err := c.pipeline(ctx, cmds)
		return wantIncrs("pipeline", got, cmds, err)
	})
	step("transaction", stepTimeout, func(ctx context.Context) error {
		cmds := []incrCmd{{k("transaction"), 1}, {k("transaction"), 4}}
		send(cmds...)
		got, err := c.transaction(ctx, cmds)
		return wantIncrs("MULTI/EXEC", got, cmds, err)
	})
	step("pipeline100k", bigTimeout, func(ctx context.Context) error {
		cmds := make([]incrCmd, 100_000)
		for i := range cmds {
			cmds[i] = incrCmd{k(fmt.Sprintf("pipeline100k:%d", i%4)), 1}
		}
		send(cmds...)
		got, err := c.pipeline(ctx, cmds)
		return wantIncrs("pipeline of 100000", got, cmds, err)
	})
	// FLUSH answers "flush not confirmed" when PostgreSQL has not
	// committed within COUNTERD_FLUSH_TIMEOUT (a loaded machine), and
	// keeps the increments: ask again, as a client should.
	step("flush", bigTimeout, func(ctx context.Context) error {
		for {
			v, err := c.flush(ctx)
			if err == nil || !strings.Contains(err.Error(), "flush not confirmed") || ctx.Err() != nil {
				return want("FLUSH", v, "OK", err)
			}
		}
	})
	return rep
}

// moduleVersion is the version go.mod requires of a module (a test
// binary's build info does not list its dependencies).
func moduleVersion(path string) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "unknown"
}

// goRedis drives go-redis v9 with its default options: RESP3 (HELLO 3),
// CLIENT SETINFO, maintenance notifications in their default mode.
type goRedis struct{ c *redis.Client }

func (g goRedis) connect(ctx context.Context) error { return g.c.Ping(ctx).Err() }
func (g goRedis) incr(ctx context.Context, key string) (int64, error) {
	return g.c.Incr(ctx, key).Result()
}
func (g goRedis) incrBy(ctx context.Context, key string, by int64) (int64, error) {
	return g.c.IncrBy(ctx, key, by).Result()
}
func (g goRedis) get(ctx context.Context, key string) (string, error) {
	return g.c.Get(ctx, key).Result()
}
func (g goRedis) mget(ctx context.Context, keys ...string) ([]string, error) {
	vals, err := g.c.MGet(ctx, keys...).Result()
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = "(nil)"
		if v != nil {
			out[i] = fmt.Sprint(v)
		}
	}
	return out, err
}

func (g goRedis) queue(p redis.Pipeliner, cmds []incrCmd) []*redis.IntCmd {
	out := make([]*redis.IntCmd, len(cmds))
	for i, c := range cmds {
		if c.by == 1 {
			out[i] = p.Incr(context.Background(), c.key)
		} else {
			out[i] = p.IncrBy(context.Background(), c.key, c.by)
		}
	}
	return out
}

// replies returns each command's reply, or the first command's error.
func (g goRedis) replies(results []*redis.IntCmd, err error) ([]int64, error) {
	out := make([]int64, len(results))
	for i, r := range results {
		n, rerr := r.Result()
		if rerr != nil {
			return nil, fmt.Errorf("reply %d: %w", i, rerr)
		}
		out[i] = n
	}
	return out, err
}

func (g goRedis) pipeline(ctx context.Context, cmds []incrCmd) ([]int64, error) {
	var results []*redis.IntCmd
	_, err := g.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		results = g.queue(p, cmds)
		return nil
	})
	return g.replies(results, err)
}

func (g goRedis) transaction(ctx context.Context, cmds []incrCmd) ([]int64, error) {
	var results []*redis.IntCmd
	_, err := g.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		results = g.queue(p, cmds)
		return nil
	})
	return g.replies(results, err)
}

func (g goRedis) flush(ctx context.Context) (string, error) {
	return g.c.Do(ctx, "FLUSH").Text()
}

func TestClientGoRedis(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, clientFlushTimeout)
	// Default options but the read timeout: go-redis resends a pipeline
	// whose replies took over 3 s, which counts INCR twice against any
	// server, and the 100,000-command pipeline can take that long on a
	// loaded CI machine (it did: 48,912 stored for 25,000 sent).
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: d.socket, ReadTimeout: time.Minute})
	defer c.Close()
	rep := runScenario("go-redis", moduleVersion("github.com/redis/go-redis/v9"), goRedis{c}, "t")
	checkReport(t, db, d, rep)
}

// rueidisClient drives rueidis with its default options but client-side
// caching off, as rueidis documents for servers without CLIENT TRACKING,
// and a reply deadline of a minute: its default, 10 s, closes the
// connection under a FLUSH or GET that waits on a loaded PostgreSQL.
type rueidisClient struct {
	socket string
	c      rueidis.Client
}

var errNotConnected = errors.New("not connected (the connect step failed)")

func (r *rueidisClient) connect(ctx context.Context) error {
	opt, err := rueidis.ParseURL("unix://" + r.socket)
	if err != nil {
		return err
	}
	opt.DisableCache = true
	opt.ConnWriteTimeout = time.Minute
	if r.c, err = rueidis.NewClient(opt); err != nil {
		return err
	}
	return r.c.Do(ctx, r.c.B().Ping().Build()).Error()
}

func (r *rueidisClient) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if r.c == nil {
		return rueidis.RedisResult{}
	}
	return r.c.Do(ctx, cmd)
}

func (r *rueidisClient) incr(ctx context.Context, key string) (int64, error) {
	if r.c == nil {
		return 0, errNotConnected
	}
	return r.do(ctx, r.c.B().Incr().Key(key).Build()).AsInt64()
}

func (r *rueidisClient) incrBy(ctx context.Context, key string, by int64) (int64, error) {
	if r.c == nil {
		return 0, errNotConnected
	}
	return r.do(ctx, r.c.B().Incrby().Key(key).Increment(by).Build()).AsInt64()
}

func (r *rueidisClient) get(ctx context.Context, key string) (string, error) {
	if r.c == nil {
		return "", errNotConnected
	}
	return r.do(ctx, r.c.B().Get().Key(key).Build()).ToString()
}

func (r *rueidisClient) mget(ctx context.Context, keys ...string) ([]string, error) {
	if r.c == nil {
		return nil, errNotConnected
	}
	msgs, err := r.do(ctx, r.c.B().Mget().Key(keys...).Build()).ToArray()
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = "(nil)"
		if s, err := m.ToString(); err == nil {
			out[i] = s
		}
	}
	return out, err
}

func (r *rueidisClient) build(cmds []incrCmd) rueidis.Commands {
	out := make(rueidis.Commands, len(cmds))
	for i, c := range cmds {
		if c.by == 1 {
			out[i] = r.c.B().Incr().Key(c.key).Build()
		} else {
			out[i] = r.c.B().Incrby().Key(c.key).Increment(c.by).Build()
		}
	}
	return out
}

func (r *rueidisClient) pipeline(ctx context.Context, cmds []incrCmd) ([]int64, error) {
	if r.c == nil {
		return nil, errNotConnected
	}
	results := r.c.DoMulti(ctx, r.build(cmds)...)
	out := make([]int64, len(results))
	for i, res := range results {
		n, err := res.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("reply %d: %w", i, err)
		}
		out[i] = n
	}
	return out, nil
}

// transaction sends MULTI, the commands and EXEC in one DoMulti, the way
// rueidis documents transactions on a pinned connection.
func (r *rueidisClient) transaction(ctx context.Context, cmds []incrCmd) ([]int64, error) {
	if r.c == nil {
		return nil, errNotConnected
	}
	multi := append(rueidis.Commands{r.c.B().Multi().Build()}, r.build(cmds)...)
	multi = append(multi, r.c.B().Exec().Build())
	results := r.c.DoMulti(ctx, multi...)
	for i, res := range results[:len(results)-1] {
		if err := res.Error(); err != nil {
			what := "MULTI"
			if i > 0 {
				what = fmt.Sprintf("queued command %d", i)
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	msgs, err := results[len(results)-1].ToArray()
	if err != nil {
		return nil, fmt.Errorf("EXEC: %w", err)
	}
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		n, err := m.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("EXEC reply %d: %w", i, err)
		}
		out[i] = n
	}
	return out, nil
}

func (r *rueidisClient) flush(ctx context.Context) (string, error) {
	if r.c == nil {
		return "", errNotConnected
	}
	return r.do(ctx, r.c.B().Arbitrary("FLUSH").Build()).ToString()
}

func TestClientRueidis(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	d := startDaemon(t, db, clientFlushTimeout)
	r := &rueidisClient{socket: d.socket}
	rep := runScenario("rueidis", moduleVersion("github.com/redis/rueidis"), r, "t")
	if r.c != nil {
		r.c.Close()
	}
	checkReport(t, db, d, rep)
}
