package resp

import (
	"reflect"
	"testing"
)

// FuzzReader checks that no input panics, that how the input is cut into
// reads never changes the commands, the error, or the bytes left over,
// and that they are those of the reference decoding (reference_test.go).
func FuzzReader(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := strategies[0].run(t, in)
		if ref := decode(in); !reflect.DeepEqual(want, ref) {
			t.Fatalf("%s: got %+v; the reference decoding is %+v", strategies[0].name, want, ref)
		}
		for _, s := range strategies[1:] {
			if got := s.run(t, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got %+v; want %+v", s.name, got, want)
			}
		}
	})
}
