package store

import "context"

// urgentKey marks a context whose batch someone waits on.
type urgentKey struct{}

// WithUrgent marks ctx as writing a batch someone waits on: FLUSH, a
// COUNTERD_ACK=commit client, a round cut because too many keys were
// pending, the final flush at shutdown. A store may spend more
// connections on such a batch to finish it sooner; a paced round that
// nobody waits on is written as smoothly as the store keeps up.
func WithUrgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// Urgent reports whether WithUrgent marked ctx.
func Urgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}
