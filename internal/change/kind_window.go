package change

import (
	"fmt"
	"time"
)

// Minute, Hour and Day are a key's count in one time bucket of that
// width, UTC-aligned; Bucket is the bucket's start in unix seconds. They
// add up like totals.
const (
	Minute Kind = 2
	Hour   Kind = 3
	Day    Kind = 4
)

func init() {
	for _, w := range []struct {
		k     Kind
		name  string
		width time.Duration
	}{{Minute, "minute", time.Minute}, {Hour, "hour", time.Hour}, {Day, "day", 24 * time.Hour}} {
		Register(w.k, Spec{Name: w.name, Width: w.width, Check: checkWindow})
	}
}

// checkWindow accepts a bucket that is the start of a bucket of its kind.
func checkWindow(c Change) error {
	w := int64(c.Kind.Width() / time.Second)
	if c.Bucket < 0 || c.Bucket%w != 0 {
		return fmt.Errorf("bucket %d is not the start of a %v bucket", c.Bucket, c.Kind)
	}
	return nil
}
