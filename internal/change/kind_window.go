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

// windowSpec is the Spec of the window kind named name, whose buckets
// are width wide.
func windowSpec(name string, width time.Duration) Spec {
	return Spec{Name: name, Width: width, Check: checkWindow(width)}
}

// checkWindow accepts a bucket that is the start of a bucket of width
// (its kind's Width, given, since the kinds table is built from this
// Spec).
func checkWindow(width time.Duration) func(Change) error {
	w := int64(width / time.Second)
	return func(c Change) error {
		if c.Bucket < 0 || c.Bucket%w != 0 {
			return fmt.Errorf("bucket %d is not the start of a %v bucket", c.Bucket, c.Kind)
		}
		return nil
	}
}
