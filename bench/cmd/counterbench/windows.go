package main

import (
	"context"
	"errors"
	"path/filepath"
	"slices"

	"github.com/counterd/counterd/bench/internal/report"
	"github.com/counterd/counterd/internal/bench/keyspace"
	"github.com/counterd/counterd/internal/bench/loadgen"
)

// benchWindows is the three windows the windows section configures, on
// every key.
const benchWindows = "*=minute:2h,hour:14d,day:400d"

// windows measures counterd without time windows and with three, side by
// side: each its own daemon (so each starts with an empty accumulator),
// under the same load (the zipf distribution if selected, else the first,
// at the highest concurrency), then FLUSHed and checked.
func (b *bench) windows(ctx context.Context) error {
	dists := b.cfg.dists()
	d := dists[0]
	if i := slices.Index(dists, keyspace.Zipf); i >= 0 {
		d = dists[i]
	}
	clients := b.cfg.Clients[len(b.cfg.Clients)-1]
	for i, c := range []struct{ name, windows string }{
		{"counterd", ""},
		{"counterd+3 windows", benchWindows},
	} {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.progress.step("windows %s %s c=%d", c.name, d, clients)
		row := report.Row{Section: report.Windows, Approach: c.name, Keys: d.String(), Clients: clients, Pipeline: 1}
		err := b.windowsCell(ctx, i, c.windows, d, clients, &row)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.add(row, err)
	}
	return nil
}

func (b *bench) windowsCell(ctx context.Context, i int, win string, d keyspace.Dist, clients int, row *report.Row) (err error) {
	name := []string{"counterd-nowindows", "counterd-windows"}[i]
	log, err := b.createLog(name + ".log")
	if err != nil {
		return err
	}
	srv, err := b.spawnCounterd(ctx, filepath.Join(b.tmp, name), log, "COUNTERD_WINDOWS="+win)
	if err != nil {
		log.Close()
		return err
	}
	srv.ownLog = true
	defer func() { err = errors.Join(err, srv.stop()) }()
	load := loadgen.Config{
		Network: "unix", Addr: srv.socket, Clients: clients, Duration: b.cfg.Duration,
		Source: b.sourceFor(d), Seed: b.nextSeed(),
	}
	_, err = b.counterdAround(ctx, srv, row, func() error {
		res, err := loadgen.Run(ctx, load)
		if err != nil {
			return err
		}
		fillFromLoad(row, res)
		return nil
	})
	return err
}
