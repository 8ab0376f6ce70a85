package prometheus

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/pgtest"
)

const dashboardFile = "../grafana/counterd.json"

// notExposedHere lists the metric families the rules or the dashboard name
// that the daemons started by TestMetricsExist do not expose, each with
// why. TestMetricsExist checks that each is still registered in the
// repository's Go code (so the list cannot outlive a renamed metric) and
// still not exposed (so it shrinks when the test starts exposing one).
var notExposedHere = map[string]string{
	// Prometheus adds it per scrape target.
	"up": "",
	// Only with COUNTERD_CLUSTER (cmd/counterd/backend.go).
	"counterd_partition_behind": "cmd/counterd/backend.go",
	// One per ROLLUP_TARGETS target (cmd/rollup/missing.go).
	"counterd_rollup_target_missing_keys_total": "cmd/rollup/missing.go",
}

// TestMetricsExist builds counterd and rollup, starts them on a fresh
// schema, sends an increment and a FLUSH (histograms are exposed once they
// hold a sample), and checks that every metric the rules and the dashboard
// name is on one of their /metrics pages or in notExposedHere, and that no
// recording rule takes a real metric's name.
func TestMetricsExist(t *testing.T) {
	t.Parallel()
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set: make test starts a throwaway PostgreSQL; this test runs counterd and rollup on it")
	}
	db := pgtest.New(t, pgtest.Options{})
	bin := t.TempDir()
	for _, name := range []string{"counterd", "rollup"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./cmd/"+name)
		cmd.Dir = "../.." // counterd's own module, as make build builds it
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	dir, err := os.MkdirTemp("", "cdm") // short: a socket path has 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "c.sock")

	counterd := start(t, filepath.Join(bin, "counterd"), `msg="serving metrics" addr=`, "counterd ready",
		"DATABASE_URL="+db.URL, "COUNTERD_SOCKET="+socket, "COUNTERD_JOURNAL_DIR="+filepath.Join(dir, "journal"),
		"COUNTERD_METRICS_ADDR=127.0.0.1:0", "COUNTERD_FSYNC=always")
	rollup := start(t, filepath.Join(bin, "rollup"), `msg="metrics listening" addr=`, `msg="metrics listening"`,
		"DATABASE_URL="+db.URL, "ROLLUP_SCHEDULE=@every 1s", "ROLLUP_METRICS_ADDR=127.0.0.1:0")

	resp(t, socket, "*2\r\n$4\r\nINCR\r\n$6\r\npost:1\r\n", ":1\r\n")
	resp(t, socket, "*1\r\n$5\r\nFLUSH\r\n", "+OK\r\n")

	exposed := map[string]bool{}
	for _, addr := range []string{counterd, rollup} {
		for _, name := range sampleNames(t, "http://"+addr+"/metrics") {
			exposed[name] = true
		}
	}

	referenced := map[string][]string{} // name -> where
	rules := readRules(t)
	recorded := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			recorded[r.Record] = true
			if exposed[r.Record] || notExposedHere[r.Record] != "" {
				t.Errorf("recording rule %s takes the name of a real metric", r.Record)
			}
		}
	}
	for _, r := range rules {
		for _, name := range metricNames(r.Expr) {
			referenced[name] = append(referenced[name], rulesFile+" "+r.Record+r.Alert)
		}
	}
	for _, p := range dashboardExprs(t) {
		for _, name := range metricNames(p.expr) {
			referenced[name] = append(referenced[name], dashboardFile+" "+p.panel)
		}
	}
	if len(referenced) < 20 {
		t.Fatalf("found only %d metric names in the rules and the dashboard: %v", len(referenced), referenced)
	}
	for name, where := range referenced {
		if exposed[name] || recorded[name] {
			continue
		}
		if _, ok := notExposedHere[family(name)]; ok {
			continue
		}
		t.Errorf("%s (named by %s) is not exposed by counterd or rollup, not a recording rule, and not in notExposedHere", name, strings.Join(slices.Compact(where), ", "))
	}
	for fam, file := range notExposedHere {
		if exposed[fam] {
			t.Errorf("notExposedHere lists %s, but it is exposed: remove it from the list", fam)
		}
		if file == "" {
			continue
		}
		src, err := os.ReadFile(filepath.Join("../..", file))
		if err != nil {
			t.Errorf("notExposedHere: %s: %v", fam, err)
			continue
		}
		if !regexp.MustCompile("`" + fam + `[{` + "`]").Match(src) {
			t.Errorf("notExposedHere lists %s as registered in %s, but it is not there", fam, file)
		}
	}
}

// family strips the suffix a histogram's samples add to its family.
func family(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, s); ok {
			return f
		}
	}
	return name
}

// start runs bin with env, waits for its log to say ready, and returns the
// address logged after addrMarker. The process is stopped with SIGTERM (then
// SIGKILL) when the test ends.
func start(t *testing.T, bin, addrMarker, ready string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var mu sync.Mutex
	var log strings.Builder
	addrc, readyc := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.OnceFunc(func() { close(readyc) })
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			log.WriteString(line + "\n")
			mu.Unlock()
			if _, a, ok := strings.Cut(line, addrMarker); ok {
				select {
				case addrc <- strings.Fields(a)[0]:
				default:
				}
			}
			if strings.Contains(line, ready) {
				once()
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	logged := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	deadline := time.After(2 * time.Minute) // a loaded machine's migrations are slow
	var addr string
	for addr == "" || readyc != nil {
		select {
		case addr = <-addrc:
		case <-readyc:
			readyc = nil
		case <-exited:
			t.Fatalf("%s exited before it was ready\n%s", filepath.Base(bin), logged())
		case <-deadline:
			t.Fatalf("%s not ready after 2 minutes\n%s", filepath.Base(bin), logged())
		}
	}
	return addr
}

// resp sends one command over counterd's socket and checks the reply.
func resp(t *testing.T, socket, command, want string) {
	t.Helper()
	c, err := net.DialTimeout("unix", socket, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, command); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != want {
		t.Fatalf("reply to %q: %q, %v; want %q", command, got, err, want)
	}
}

// sampleNames lists the sample names on a /metrics page: histograms appear
// as their _bucket, _sum and _count samples, as PromQL names them.
func sampleNames(t *testing.T, url string) []string {
	t.Helper()
	c := http.Client{Timeout: time.Minute}
	r, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, r.Status)
	}
	var names []string
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names = append(names, line[:i])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("GET %s: no samples", url)
	}
	return names
}

type panelExpr struct{ panel, expr string }

// dashboardExprs returns every target expression and variable query of
// the dashboard.
func dashboardExprs(t *testing.T) []panelExpr {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []panelExpr
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, panelExpr{p.Title, tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		// label_values(metric{...}, label): the metric is what matters.
		if m := regexp.MustCompile(`^label_values\((.*), *[a-z_]+\)$`).FindStringSubmatch(v.Definition); m != nil {
			out = append(out, panelExpr{"variable " + v.Name, m[1]})
		}
	}
	return out
}

// PromQL's words that are not metric names: keywords and operators
// spelled as words. Function names are told apart by the "(" after them.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "bool": true, "offset": true,
	"atan2": true, "inf": true, "nan": true,
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchers   = regexp.MustCompile(`\{[^}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	numbers    = regexp.MustCompile(`\b[0-9][0-9a-zA-Z.]*`) // 0.99, 1e3, 5m (offset)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
)

// metricNames extracts the metric names a PromQL expression selects, by
// stripping what cannot hold one (strings, label matchers, range and
// subquery brackets, by/without/on/ignoring label lists, numbers and
// durations) and keeping the identifiers left that are neither a function
// (a "(" follows) nor a keyword. It is not a PromQL parser; promtool (check rules, and the
// dashboard's expressions in deploy/grafana) parses them properly.
// Grafana's $variables are inside strings or brackets, so they go too.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = numbers.ReplaceAllString(e, " ")
	var names []string
	for _, m := range identifier.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || promqlWords[strings.ToLower(m[0])] {
			continue
		}
		if !slices.Contains(names, m[0]) {
			names = append(names, m[0])
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	f := func(expr string, want ...string) {
		t.Helper()
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q): got %q; want %q", expr, got, want)
		}
	}
	f(`up{job="counterd"} == 0`, "up")
	f(`absent(up{job="counterd"})`, "up")
	f(`rate(counterd_flushes_total[5m])`, "counterd_flushes_total")
	f(`histogram_quantile(0.99, sum by (job, instance, le) (rate(counterd_flush_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
		"counterd_flush_duration_seconds_bucket")
	f(`(counterd_pending_keys > 0 or counterd_queued_rounds > 0) and rate(counterd_flushes_total[5m]) == 0`,
		"counterd_pending_keys", "counterd_queued_rounds", "counterd_flushes_total")
	f(`sum without (result) (increase(counterd_rollup_passes_total{result="error"}[1h])) > sum without(result) (x)`,
		"counterd_rollup_passes_total", "x")
	f(`counterd:journal_usage:ratio{instance=~"a|b"} > 1e3`, "counterd:journal_usage:ratio")
	f(`count by (reason) (counterd_flush_interval_reason{reason="by (x)"} == 1) offset 5m`, "counterd_flush_interval_reason")
	f(`a / on(instance) group_left(partition) b`, "a", "b")
}

func TestFamily(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"a_bucket": "a", "a_sum": "a", "a_count": "a", "a_total": "a_total"} {
		if got := family(in); got != want {
			t.Errorf("family(%q): got %q; want %q", in, got, want)
		}
	}
}
