// Package peer is what a team builds instead of counterd: the
// Redis-buffer-plus-worker pattern of Discourse and GitLab. Clients send
// HINCRBY counts KEY 1 to a durable redis-server (appendfsync everysec);
// a worker moves the buffer into PostgreSQL every second with RENAME
// counts counts:moving, HGETALL, one multi-row upsert and DEL. The one
// idea to keep in mind: a renamed hash is moved whole or not at all, and
// it stays in Redis until PostgreSQL has committed it.
//
// What the pattern loses on a crash, and so what the comparison with
// counterd weighs: redis-server acknowledges an HINCRBY before its
// append-only file is fsynced, so a crash of the machine loses up to
// about two seconds of acknowledged increments (everysec fsyncs once a
// second and lets a slow fsync run a second late). A crash of the worker
// between PostgreSQL's commit and the DEL moves that hash again on
// restart, counting it twice; a crash before the commit loses nothing
// (the hash is moved again, once). counterd journals before it
// acknowledges and commits every round exactly once.
package peer

import (
	"context"
	"fmt"
	"strconv"
)

// The buffer's keys: clients increment Hash; the worker renames it to
// Moving, so increments arriving during a move go to a fresh Hash.
const (
	Hash   = "counts"
	Moving = "counts:moving"
)

// Buffer is the part of redis-server the worker uses.
type Buffer interface {
	// Exists reports whether key holds anything.
	Exists(ctx context.Context, key string) (bool, error)
	// Rename renames from to to; false when from does not exist.
	Rename(ctx context.Context, from, to string) (bool, error)
	// HGetAll returns every field of a hash and its value.
	HGetAll(ctx context.Context, key string) (map[string]string, error)
	// Del removes key.
	Del(ctx context.Context, key string) error
}

// Store adds deltas to keys' totals in one statement, all or nothing.
type Store interface {
	Add(ctx context.Context, keys []string, deltas []int64) error
}

// Stats counts what a Mover moved: hashes, fields (rows upserted) and the
// increments they carried.
type Stats struct {
	Moves, Rows, Increments int64
}

// Mover moves the buffer into the store.
type Mover struct {
	Buffer Buffer
	Store  Store
	Stats  Stats
}

// Move moves everything the buffer holds. A hash a failed move left
// behind goes first: renaming over it would drop its increments. When
// the upsert fails the renamed hash stays for the next Move, and Move
// returns the error.
func (m *Mover) Move(ctx context.Context) error {
	left, err := m.Buffer.Exists(ctx, Moving)
	if err != nil {
		return fmt.Errorf("EXISTS %s: %w", Moving, err)
	}
	if left {
		if err := m.moveRenamed(ctx); err != nil {
			return err
		}
	}
	renamed, err := m.Buffer.Rename(ctx, Hash, Moving)
	if err != nil {
		return fmt.Errorf("RENAME %s %s: %w", Hash, Moving, err)
	}
	if !renamed {
		return nil // nothing came in since the last move
	}
	return m.moveRenamed(ctx)
}

// moveRenamed upserts Moving's fields and then deletes it.
func (m *Mover) moveRenamed(ctx context.Context) error {
	fields, err := m.Buffer.HGetAll(ctx, Moving)
	if err != nil {
		return fmt.Errorf("HGETALL %s: %w", Moving, err)
	}
	keys, deltas, sum, err := Columns(fields)
	if err != nil {
		return fmt.Errorf("%s: %w", Moving, err)
	}
	if len(keys) > 0 {
		if err := m.Store.Add(ctx, keys, deltas); err != nil {
			return fmt.Errorf("upsert %d keys (%s stays for the next move): %w", len(keys), Moving, err)
		}
	}
	// A crash here, after the commit and before the DEL, moves this
	// hash again: the pattern's double count.
	if err := m.Buffer.Del(ctx, Moving); err != nil {
		return fmt.Errorf("DEL %s after its upsert committed: %w", Moving, err)
	}
	m.Stats.Moves++
	m.Stats.Rows += int64(len(keys))
	m.Stats.Increments += sum
	return nil
}

// Columns turns a hash's fields into the upsert's two arrays and sums
// the deltas. Every value must be an integer, as HINCRBY leaves it.
func Columns(fields map[string]string) (keys []string, deltas []int64, sum int64, err error) {
	keys = make([]string, 0, len(fields))
	deltas = make([]int64, 0, len(fields))
	for k, v := range fields {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("field %q holds %q, not an integer", k, v)
		}
		keys = append(keys, k)
		deltas = append(deltas, n)
		sum += n
	}
	return keys, deltas, sum, nil
}
