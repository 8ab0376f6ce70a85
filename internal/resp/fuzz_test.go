package resp

import (
	"reflect"
	"testing"
)

// FuzzReader checks that no input panics, and that how the input is cut into
// reads never changes the commands, the error, or the bytes left over.
func FuzzReader(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := strategies[0].run(t, in)
		for _, s := range strategies[1:] {
			if got := s.run(t, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got %+v; want %+v", s.name, got, want)
			}
		}
	})
}
