package journal_test

import (
	"testing"

	"github.com/counterd/counterd/internal/journal"
)

func TestFsyncModeUnmarshalText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    journal.FsyncMode
		wantErr string
	}{
		{in: "always", want: journal.FsyncAlways},
		{in: "everysec", want: journal.FsyncEverySec},
		{in: "no", want: journal.FsyncNo},
		{in: "ALWAYS", want: journal.FsyncAlways},
		{in: "EverySec", want: journal.FsyncEverySec},
		{in: "No", want: journal.FsyncNo},
		{in: "", wantErr: `"" is not always, everysec or no`},
		{in: "x", wantErr: `"x" is not always, everysec or no`},
		{in: " always", wantErr: `" always" is not always, everysec or no`},
		{in: "1", wantErr: `"1" is not always, everysec or no`},
	}
	for _, tt := range tests {
		var got journal.FsyncMode
		err := got.UnmarshalText([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("UnmarshalText(%q): got error %v; want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("UnmarshalText(%q): got %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestFsyncModeStringRoundTrips(t *testing.T) {
	t.Parallel()
	for _, m := range []journal.FsyncMode{journal.FsyncEverySec, journal.FsyncAlways, journal.FsyncNo} {
		var got journal.FsyncMode
		if err := got.UnmarshalText([]byte(m.String())); err != nil || got != m {
			t.Errorf("UnmarshalText(%q): got %v, %v; want %v, nil", m.String(), got, err, m)
		}
	}
	if got, want := journal.FsyncMode(7).String(), "FsyncMode(7)"; got != want {
		t.Errorf("String of an unknown mode: got %q; want %q", got, want)
	}
}
