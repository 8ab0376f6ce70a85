package server

import (
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want error
	}{
		{"post:42", nil},
		{"a", nil},
		{strings.Repeat("k", 256), nil},
		{"café:1", nil},
		{"投稿:1", nil},
		{"", errKeyEmpty},
		{strings.Repeat("k", 257), errKeyLong},
		{"post 42", errKeyControl},
		{"post\t42", errKeyControl},
		{"post\x0042", errKeyControl},
		{"post\x7f", errKeyControl},
		{"post\u00a042", errKeyControl}, // no-break space
		{"post\u200942", errKeyControl}, // thin space
		{"post\u008542", errKeyControl}, // C1 control
		{"post\xff", errKeyUTF8},
		{"post\xc3", errKeyUTF8},
	}
	for _, tt := range tests {
		if got := checkKey([]byte(tt.key)); got != tt.want {
			t.Errorf("checkKey(%q): got %v; want %v", tt.key, got, tt.want)
		}
	}
}

func FuzzCheckKey(f *testing.F) {
	f.Add([]byte("post:42"))
	f.Add([]byte("投稿 1"))
	f.Fuzz(func(t *testing.T, key []byte) {
		if checkKey(key) != nil {
			return
		}
		// Whatever passes is printable text PostgreSQL accepts.
		if len(key) == 0 || len(key) > MaxKeyLen || strings.ContainsAny(string(key), " \t\r\n\x00") {
			t.Fatalf("accepted %q", key)
		}
	})
}
