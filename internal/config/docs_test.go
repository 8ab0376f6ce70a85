package config_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/config"
)

// envVars lists the variables a configuration struct reads.
func envVars(cfg any) []string {
	var out []string
	t := reflect.TypeOf(cfg)
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("env")
		if name, _, _ := strings.Cut(tag, ","); name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// docVars lists the variables docs/configuration.md's tables name with
// the given prefix (DATABASE_URL is in both tables).
func docVars(t *testing.T, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?m)^\\| `(" + prefix + "[A-Z_]+|DATABASE_URL)` \\|")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

// docs/configuration.md's tables list exactly what the binaries read, so
// a setting is never undocumented or documented but gone.
func TestDocsListEverySetting(t *testing.T) {
	t.Parallel()
	f := func(cfg any, prefix string) {
		t.Helper()
		code, doc := envVars(cfg), docVars(t, prefix)
		if !slices.Equal(code, doc) {
			t.Errorf("%s settings: code reads %v; docs/configuration.md lists %v", prefix, code, doc)
		}
	}
	f(config.Counterd{}, "COUNTERD_")
	f(config.Rollup{}, "ROLLUP_")
}
