package slots

import "context"

// Trim closes the pool's idle connections, which PostgreSQL and the pool
// open again as they are needed. pgx keeps what it encoded for a
// connection's statements (the round's arrays, tens of MB per writer's
// connection after a round of a million keys) until later statements
// overwrite it, so after a burst that memory would stay for as long as
// the connection does. Connections in use are left alone.
func (s *Store) Trim(ctx context.Context) {
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		_ = c.Hijack().Close(ctx) // out of the pool either way
	}
}
