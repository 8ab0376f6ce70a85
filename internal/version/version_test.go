package version

import (
	"strings"
	"testing"
)

// Not parallel: it sets the package's link-time variable.
func TestString(t *testing.T) {
	if got := String("counterd"); !strings.HasPrefix(got, "counterd ") || strings.Contains(got, "\n") {
		t.Fatalf("String: got %q; want one line starting with the program", got)
	}
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	if got := String("rollup"); !strings.HasPrefix(got, "rollup v1.2.3") {
		t.Fatalf("String with -ldflags version v1.2.3: got %q; want it to start rollup v1.2.3", got)
	}
}
