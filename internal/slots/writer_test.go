package slots

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
)

// The round statement numbers the parameters its parts declare as it
// composes them: every statement of inline parts uses exactly $1 through
// $(2 + what its parts declare), each with one type, and so does the
// statement INCRONCE adds its counted views with.
func TestRoundStatementParams(t *testing.T) {
	t.Parallel()
	param := regexp.MustCompile(`\$([0-9]+)(::[a-z0-9]+(\[\])?)?`)
	check := func(name, q string, want int) {
		t.Helper()
		types := map[int]string{} // number → its cast, "" for none
		for _, m := range param.FindAllStringSubmatch(q, -1) {
			n, _ := strconv.Atoi(m[1])
			if typ, ok := types[n]; ok && typ != m[2] {
				t.Errorf("%s: $%d is cast to %q and %q", name, n, typ, m[2])
			}
			types[n] = m[2]
		}
		for n := 1; n <= want; n++ {
			if _, ok := types[n]; !ok {
				t.Errorf("%s: $%d unused; want $1 through $%d", name, n, want)
			}
		}
		if len(types) != want {
			t.Errorf("%s: got %d parameters; want %d", name, len(types), want)
		}
	}
	ws := testWriters(t)
	for mask := uint64(0); mask < 1<<len(ws.list); mask++ {
		want, ok := 2, true
		for i, w := range ws.list {
			if mask&(1<<i) == 0 {
				continue
			}
			if w.inline == nil {
				ok = false
				break
			}
			want += len(w.inline.params)
		}
		if !ok {
			continue
		}
		for _, expiring := range []bool{false, true} {
			check(fmt.Sprintf("roundStatement(%b, %v)", mask, expiring), ws.statement(mask, expiring), want)
		}
	}
	for _, expiring := range []bool{false, true} {
		check(fmt.Sprintf("decidedTotals(%v, false)", expiring), decidedTotals(expiring, false), 1+len(totalsPart.params))
		check(fmt.Sprintf("decidedTotals(%v, true)", expiring), decidedTotals(expiring, true), 1+len(totalsPart.params)+len(bucketsPart.params))
	}
}
