// Package cluster runs counterd on a PL/Proxy cluster: a proxy database
// where the operator has declared the cluster (CREATE SERVER name FOREIGN
// DATA WRAPPER plproxy OPTIONS (p0 '...', p1 '...')) and a user mapping,
// and 2^k partition databases. Every row of a key lives on partition
// hashtext(key) & (n-1) (Partition), the partition PL/Proxy's own
// RUN ON hashtext(key) picks, so the application's PL/Proxy functions
// find what counterd wrote.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrNotDeclared is a cluster name the proxy database has no PL/Proxy
// server of.
var ErrNotDeclared = errors.New("no PL/Proxy server of that name in the proxy database")

// ErrBadDeclaration is a cluster whose partitions PL/Proxy would refuse.
var ErrBadDeclaration = errors.New("the cluster's declaration is unusable")

// Querier is what Discover needs of a connection to the proxy database.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Discover reads cluster name's partitions from the proxy database: each
// partition's connection string (its pN option) with the user mapping's
// options for the current user (user, password) appended, in partition
// order. It refuses a cluster that does not exist, whose partitions are
// not p0..p(n-1), or whose count is not a power of two, as PL/Proxy
// does. The strings may hold a password: never log them.
func Discover(ctx context.Context, q Querier, name string) ([]string, error) {
	var server, mapping []string
	err := q.QueryRow(ctx, `
SELECT s.srvoptions, coalesce(
    (SELECT umoptions FROM pg_user_mappings m WHERE m.srvid = s.oid AND m.usename = current_user),
    (SELECT umoptions FROM pg_user_mappings m WHERE m.srvid = s.oid AND m.usename = 'public'))
  FROM pg_foreign_server s
  JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
 WHERE s.srvname = $1 AND w.fdwname = 'plproxy'`, name).Scan(&server, &mapping)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cluster %q: %w (CREATE SERVER %s FOREIGN DATA WRAPPER plproxy OPTIONS (p0 '...', ...))", name, ErrNotDeclared, name)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %q: read its definition: %w", name, err)
	}
	parts, err := partitions(name, server)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDeclaration, err)
	}
	auth, err := userOptions(mapping)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: user mapping: %w", name, err)
	}
	for i := range parts {
		if auth != "" {
			parts[i] += " " + auth
		}
	}
	return parts, nil
}

// partitions returns the pN options of a server's options, in order.
func partitions(name string, options []string) ([]string, error) {
	byIndex := map[int]string{}
	for _, o := range options {
		k, v, _ := strings.Cut(o, "=")
		if len(k) < 2 || k[0] != 'p' {
			continue
		}
		i, err := strconv.Atoi(k[1:])
		if err != nil || i < 0 || strconv.Itoa(i) != k[1:] {
			continue
		}
		byIndex[i] = v
	}
	n := len(byIndex)
	switch {
	case n == 0:
		return nil, fmt.Errorf("cluster %q has no partitions (options p0, p1, ...)", name)
	case bits.OnesCount(uint(n)) != 1:
		return nil, fmt.Errorf("cluster %q has %d partitions; PL/Proxy needs a power of two", name, n)
	}
	out := make([]string, n)
	for i := range n {
		v, ok := byIndex[i]
		if !ok {
			idx := make([]int, 0, n)
			for j := range byIndex {
				idx = append(idx, j)
			}
			sort.Ints(idx)
			return nil, fmt.Errorf("cluster %q: partitions %v are not p0..p%d", name, idx, n-1)
		}
		out[i] = v
	}
	return out, nil
}

// userOptions turns a user mapping's options into connection string
// keywords: user and password, quoted as libpq reads them.
func userOptions(options []string) (string, error) {
	var out []string
	for _, o := range options {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			return "", fmt.Errorf("option %q has no value", k)
		}
		switch k {
		case "user", "password":
			out = append(out, k+"="+quote(v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " "), nil
}

// quote quotes a connection string value: in single quotes, with
// backslashes and single quotes escaped.
func quote(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}
