package release

import "testing"

func TestDebVersion(t *testing.T) {
	t.Parallel()
	f := func(in, want string) {
		t.Helper()
		got, err := DebVersion(in)
		if err != nil {
			t.Errorf("DebVersion(%q): %v; want %q", in, err, want)
			return
		}
		if got != want {
			t.Errorf("DebVersion(%q) = %q; want %q", in, got, want)
		}
	}
	f("v1.2.3", "1.2.3")
	f("1.2.3", "1.2.3")
	f("v1.2.3-rc1", "1.2.3~rc1")
	f("v1.2.3-4-g1a2b3c4", "1.2.3+4.g1a2b3c4")
	f("v1.2.3-4-g1a2b3c4-dirty", "1.2.3+4.g1a2b3c4.dirty")
	f("v1.2.3-dirty", "1.2.3+dirty")
	f("v1.2.3-rc1-2-gabcdef0", "1.2.3~rc1+2.gabcdef0")
	f("1a2b3c4", "0.0.0+g1a2b3c4")
	f("1a2b3c4-dirty", "0.0.0+g1a2b3c4.dirty")

	bad := func(in string) {
		t.Helper()
		if got, err := DebVersion(in); err == nil {
			t.Errorf("DebVersion(%q) = %q; want an error", in, got)
		}
	}
	bad("")
	bad("release-one")
	bad("v1.2.3_beta")
}

// TestDebVersionSorts checks with dpkg that the versions sort as the
// commits do: a release candidate before its release, commits after it.
func TestDebVersionSorts(t *testing.T) {
	t.Parallel()
	dpkg := lookPath(t, "dpkg")
	order := []string{"1a2b3c4", "v0.9.0", "v1.2.3-rc1", "v1.2.3-rc1-2-gabcdef0", "v1.2.3", "v1.2.3-4-g1a2b3c4", "v1.2.3-4-g1a2b3c4-dirty", "v1.2.3-5-g9999999", "v1.10.0"}
	for i := 1; i < len(order); i++ {
		a, err := DebVersion(order[i-1])
		must(t, err)
		b, err := DebVersion(order[i])
		must(t, err)
		if out, err := command(dpkg, "--compare-versions", a, "lt", b).CombinedOutput(); err != nil {
			t.Errorf("dpkg --compare-versions %s lt %s (%s, %s): %v %s", a, b, order[i-1], order[i], err, out)
		}
	}
}
