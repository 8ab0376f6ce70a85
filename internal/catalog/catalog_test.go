package catalog_test

import (
	"testing"

	"github.com/counterd/counterd/internal/catalog"
	"github.com/counterd/counterd/internal/change"
)

// Every kind this build declares has exactly one writer in the list, and
// the list names no kind it does not declare.
func TestWritersCoverEveryKind(t *testing.T) {
	t.Parallel()
	writers := map[change.Kind][]string{}
	for _, w := range catalog.Writers() {
		for _, k := range w.Kinds {
			writers[k] = append(writers[k], w.Name)
		}
	}
	for k := range 256 {
		k := change.Kind(k)
		got := len(writers[k])
		switch {
		case k.Valid() && got != 1:
			t.Errorf("kind %v: got writers %v; want one", k, writers[k])
		case !k.Valid() && got != 0:
			t.Errorf("kind %d is not declared but has writers %v", uint8(k), writers[k])
		}
	}
}
