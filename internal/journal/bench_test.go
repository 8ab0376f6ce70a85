package journal_test

import (
	"fmt"
	"testing"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/journal"
)

// benchItems is a typical record: one connection's pipelined batch.
func benchItems() []change.Change {
	its := make([]change.Change, 16)
	for i := range its {
		its[i] = change.Change{Key: fmt.Sprintf("post:%d", 1000+i), Kind: change.Total, Delta: 1}
	}
	return its
}

func BenchmarkAppend(b *testing.B) {
	for _, mode := range []journal.FsyncMode{journal.FsyncNo, journal.FsyncEverySec} {
		b.Run(mode.String(), func(b *testing.B) {
			j, _ := openT(b, journal.Options{Dir: b.TempDir(), Fsync: mode})
			its := benchItems()
			pos, err := j.Append(its)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(pos.Offset - headerSize)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := j.Append(its); err != nil {
					b.Fatal(err)
				}
				// Keep the disk use of long runs bounded, as rounds do.
				if n++; n%(1<<16) == 0 {
					rotateAndRemove(b, j)
				}
			}
		})
	}
}

// BenchmarkAppendWaitDurableParallel measures group commit: many
// connections each appending and waiting for their own fsync.
func BenchmarkAppendWaitDurableParallel(b *testing.B) {
	j, _ := openT(b, journal.Options{Dir: b.TempDir(), Fsync: journal.FsyncAlways})
	its := benchItems()
	ctx := b.Context()
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			pos, err := j.Append(its)
			if err != nil {
				b.Error(err)
				return
			}
			if err := j.WaitDurable(ctx, pos); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func rotateAndRemove(b *testing.B, j *journal.Journal) {
	closed, ok, err := j.Rotate()
	if err != nil {
		b.Fatal(err)
	}
	if ok {
		if err := j.Remove(closed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRound measures one round's journal work as the daemon does it:
// an Append, then Rotate, Seal and Remove of the closed segment. Its cost
// is the segment file churn per round, not the append.
func BenchmarkRound(b *testing.B) {
	for _, mode := range []journal.FsyncMode{journal.FsyncNo, journal.FsyncEverySec, journal.FsyncAlways} {
		b.Run(mode.String(), func(b *testing.B) {
			j, _ := openT(b, journal.Options{Dir: b.TempDir(), Fsync: mode})
			its := benchItems()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := j.Append(its); err != nil {
					b.Fatal(err)
				}
				closed, ok, err := j.Rotate()
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				if err := j.Seal(); err != nil {
					b.Fatal(err)
				}
				if err := j.Remove(closed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
