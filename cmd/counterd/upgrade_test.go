package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/migrate"
	"github.com/counterd/counterd/internal/pgtest"
)

// previousRelease is the commit whose counterd the upgrade test runs
// beside this one: the last before migration 020, which brought the
// refusal of unknown migrations.
const previousRelease = "20c8e30"

// buildPrevious builds previousRelease's counterd from the repository
// this checkout belongs to and returns its path. It skips the test when
// the checkout cannot give that commit (a shallow clone, a source tree
// without git).
func buildPrevious(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout (git rev-parse: %v): cannot build the previous release %s", err, previousRelease)
	}
	repo := strings.TrimSpace(string(root))
	if err := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		shallow, _ := exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--is-shallow-repository").Output()
		if strings.TrimSpace(string(shallow)) == "true" {
			t.Skipf("this clone is shallow and lacks commit %s, the previous release: run the test in a full clone", previousRelease)
		}
		t.Fatalf("commit %s (the previous release) is not in %s: %v", previousRelease, repo, err)
	}
	src := t.TempDir()
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", previousRelease)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	var aerr bytes.Buffer
	archive.Stderr = &aerr
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar -x of %s: %v\n%s", previousRelease, err, out)
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", previousRelease, err, aerr.String())
	}
	bin := filepath.Join(t.TempDir(), "counterd-"+previousRelease)
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=false",
		"-ldflags", "-X github.com/counterd/counterd/internal/version.version=prev-"+previousRelease,
		"-o", bin, "./cmd/counterd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build counterd of %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// runAs makes d run bin instead of this package's counterd (launch
// appends its binary as the last word of wrap, which sh then ignores).
func runAs(d *daemon, bin string) {
	d.wrap = []string{"/bin/sh", "-c", `exec "$0"`, bin}
}

// TestUpgradeRolling is a rolling upgrade as docs/upgrading.md describes
// it: a daemon of this version migrates the schema first, a daemon of the
// previous release starts against it (migration 020 is declared
// compatible with 019) and both take increments of the same keys at once;
// every increment lands exactly once, and counterd_fleet shows both. A
// schema with a migration declared compatible with this version is used;
// one with a migration that is not is refused at start with exit status 2
// and one line naming both versions.
func TestUpgradeRolling(t *testing.T) {
	t.Parallel()
	prev := buildPrevious(t)
	ctx := context.Background()
	newest, err := migrate.Newest()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	ver := strings.Fields(string(out))[1] // "counterd <version> (...)"

	db := pgtest.New(t, pgtest.Options{NoMigrate: true})
	cur := startDaemon(t, db) // migrates the schema first
	old := newDaemon(t, db)
	runAs(old, prev)
	old.start()
	t.Cleanup(old.kill)

	const perDaemon, keys, batch = 20000, 100, 500
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, d := range []*daemon{cur, old} {
		c := client(t, d.socket)
		wg.Go(func() {
			for start := 0; start < perDaemon && errs[i] == nil; start += batch {
				pipe := c.Pipeline()
				for n := start; n < start+batch; n++ {
					pipe.Incr(ctx, fmt.Sprintf("up:%d", n%keys))
				}
				_, errs[i] = pipe.Exec(ctx)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("INCR: %v\nnew:\n%s\nprevious:\n%s", err, cur.log(), old.log())
	}
	flush(t, cur.socket)
	flush(t, old.socket)
	var n, sum, wrong int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(total), 0), count(*) FILTER (WHERE total <> $1)
		FROM counter_totals WHERE key LIKE 'up:%'`, 2*perDaemon/keys).Scan(&n, &sum, &wrong); err != nil {
		t.Fatal(err)
	}
	if n != keys || sum != 2*perDaemon || wrong != 0 {
		t.Errorf("counter_totals: %d keys summing to %d, %d of them not %d; want %d keys summing to %d",
			n, sum, wrong, 2*perDaemon/keys, keys, 2*perDaemon)
	}

	// The fleet: both live, this version reporting itself, the previous
	// release not (it predates the columns).
	rows, err := db.Pool.Query(ctx, `SELECT coalesce(version, '-') || ' ' || coalesce(migration::text, '-') || ' ' || live
		FROM counterd_fleet ORDER BY version NULLS LAST`)
	if err != nil {
		t.Fatal(err)
	}
	var fleet []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		fleet = append(fleet, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprintf("%s %d true", ver, newest.Version), "- - true"}; strings.Join(fleet, "; ") != strings.Join(want, "; ") {
		t.Errorf("counterd_fleet: %q; want %q", fleet, want)
	}
	if body, want := httpGet(t, "http://"+cur.metricsAddr()+"/metrics"), fmt.Sprintf(`counterd_build_info{version=%q,goversion="go`, ver); !strings.Contains(body, want) {
		t.Errorf("/metrics has no %s...} 1", want)
	}
	cur.stop()
	old.stop()

	// The next release's expand migration, declared compatible with
	// this one: this version runs against it.
	next := newest.Version + 1
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counterd_migrations (version, name, compatible_with) VALUES ($1, 'expand', $2)`, next, newest.Version); err != nil {
		t.Fatal(err)
	}
	allowed := startDaemon(t, db)
	allowed.stop()

	// Its contract migration, declared incompatible: refused, with exit
	// status 2 and one line naming both versions, before it serves.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO counterd_migrations (version, name, compatible_with) VALUES ($1, 'contract', $1)`, next+1); err != nil {
		t.Fatal(err)
	}
	refused := newDaemon(t, db)
	if refused.launch() {
		refused.kill()
		t.Fatalf("counterd started against a schema with migration %03d_contract\n%s", next+1, refused.log())
	}
	var exit *exec.ExitError
	if !errors.As(refused.err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("exit: %v; want status 2\n%s", refused.err, refused.log())
	}
	var lines []string
	for _, line := range strings.Split(refused.log(), "\n") {
		if strings.HasPrefix(line, "counterd: ") {
			lines = append(lines, line)
		}
	}
	want := []string{
		"version " + ver,
		fmt.Sprintf("knows migrations up to %03d_%s", newest.Version, newest.Name),
		fmt.Sprintf("has migration %03d_contract", next+1),
		fmt.Sprintf("knows migration %03d or later", next+1),
	}
	if len(lines) != 1 {
		t.Fatalf("error lines: %q; want one\n%s", lines, refused.log())
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("refusal %q does not say %q", lines[0], w)
		}
	}
	if _, err := os.Stat(refused.socket); err == nil {
		t.Errorf("the refused daemon left its socket %s", refused.socket)
	}
}
