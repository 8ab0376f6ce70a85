package peer

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisBuffer is a Buffer on a go-redis client.
type RedisBuffer struct{ C *redis.Client }

// Exists implements Buffer.
func (r RedisBuffer) Exists(ctx context.Context, key string) (bool, error) {
	n, err := r.C.Exists(ctx, key).Result()
	return n > 0, err
}

// Rename implements Buffer: redis-server refuses to rename a key that
// does not exist with "ERR no such key".
func (r RedisBuffer) Rename(ctx context.Context, from, to string) (bool, error) {
	err := r.C.Rename(ctx, from, to).Err()
	if err != nil && strings.Contains(err.Error(), "no such key") {
		return false, nil
	}
	return err == nil, err
}

// HGetAll implements Buffer.
func (r RedisBuffer) HGetAll(ctx context.Context, key string) (map[string]string, error) {
	return r.C.HGetAll(ctx, key).Result()
}

// Del implements Buffer.
func (r RedisBuffer) Del(ctx context.Context, key string) error {
	return r.C.Del(ctx, key).Err()
}
