package hll

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/counterd/counterd/internal/pgtest"
)

// The golden tests ask the real extension. It is created in the test,
// not by a migration: this package has no tables of its own, and the
// extension belongs to the database, so it goes to schema public once and
// each test's schema sees it through its search_path.

var extension struct {
	once sync.Once
	err  error
}

// createExtension runs CREATE EXTENSION once per test binary; a concurrent
// creator elsewhere (another package's tests) shows up as a unique
// violation, after which the extension is there.
func createExtension(ctx context.Context, url string) error {
	extension.once.Do(func() {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			extension.err = err
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS hll SCHEMA public")
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42710") {
			err = nil
		}
		extension.err = err
	})
	return extension.err
}

// goldenDB returns a pool on a fresh schema that also sees the extension.
func goldenDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db := pgtest.New(t, pgtest.Options{NoMigrate: true, MaxConns: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := createExtension(ctx, pgtest.URL(t)); err != nil {
		t.Fatalf("CREATE EXTENSION hll: %v (install postgresql-15-hll; make test does)", err)
	}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = db.Schema + ",public"
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hashMembers are members of every shape a client can send.
var hashMembers = [][]byte{
	{}, // the empty member, whose hash is 0
	[]byte("a"),
	[]byte("hello"),
	[]byte("user:7"),
	[]byte("héllo wörld"),
	[]byte("日本語のテキスト"),
	[]byte("🦊 emoji"),
	[]byte("a\\\\b"),
	[]byte("\x00"),
	[]byte("\x00\x01\x02\xff"),
	[]byte("nul\x00inside"),
	[]byte("\xff\xfe not utf-8"),
	[]byte("exactly 15 byte"),
	[]byte("exactly 16 bytes"),
	[]byte("exactly 17 bytes."),
	[]byte(strings.Repeat("long member ", 100)),
}

func TestGoldenHashes(t *testing.T) {
	t.Parallel()
	pool, ctx := goldenDB(t), ctxFor(t)
	for _, m := range hashMembers {
		var byBytea, seeded, negSeed int64
		err := pool.QueryRow(ctx, `SELECT hll_hash_bytea($1)::text::int8,
			hll_hash_bytea($1, 7)::text::int8, hll_hash_bytea($1, -1)::text::int8`, m).
			Scan(&byBytea, &seeded, &negSeed)
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(Hash(m)); got != byBytea {
			t.Errorf("Hash(%q) = %d; hll_hash_bytea = %d", m, got, byBytea)
		}
		if got, _ := Sum128(m, 7); int64(got) != seeded {
			t.Errorf("Sum128(%q, 7) = %d; hll_hash_bytea(m, 7) = %d", m, int64(got), seeded)
		}
		if got, _ := Sum128(m, math.MaxUint32); int64(got) != negSeed {
			t.Errorf("Sum128(%q, 2^32-1) = %d; hll_hash_bytea(m, -1) = %d", m, int64(got), negSeed)
		}
		if !utf8.Valid(m) || bytes.IndexByte(m, 0) >= 0 {
			continue // not text
		}
		var byText, byConvert, byCast int64
		err = pool.QueryRow(ctx, `SELECT hll_hash_text($1::text)::text::int8,
			hll_hash_bytea(convert_to($1::text, 'UTF8'))::text::int8,
			hll_hash_bytea($1::text::bytea)::text::int8`, string(m)).Scan(&byText, &byConvert, &byCast)
		if err != nil {
			t.Fatalf("%q: %v", m, err)
		}
		if byText != byBytea || byConvert != byBytea {
			t.Errorf("%q: hll_hash_text = %d, via convert_to = %d; want hll_hash_bytea's %d", m, byText, byConvert, byBytea)
		}
		// The text-to-bytea cast reads backslash escapes: a\\b is 3 bytes.
		if wantSame := !bytes.Contains(m, []byte{'\\'}); (byCast == byBytea) != wantSame {
			t.Errorf("%q: hll_hash_bytea(m::bytea) = %d against %d; want equal %v", m, byCast, byBytea, wantSame)
		}
	}
}

func TestGoldenIntegerHashes(t *testing.T) {
	t.Parallel()
	pool, ctx := goldenDB(t), ctxFor(t)
	for _, v := range []int64{0, 1, -1, 42, 1 << 40, math.MinInt64, math.MaxInt64, math.MinInt32, math.MaxInt16} {
		var b, i, s, bo int64
		err := pool.QueryRow(ctx, `SELECT hll_hash_bigint($1)::text::int8, hll_hash_integer($2)::text::int8,
			hll_hash_smallint($3)::text::int8, hll_hash_boolean($4)::text::int8`,
			v, int32(v), int16(v), v&1 == 1).Scan(&b, &i, &s, &bo)
		if err != nil {
			t.Fatal(err)
		}
		if int64(HashInt64(v)) != b || int64(HashInt32(int32(v))) != i ||
			int64(HashInt16(int16(v))) != s || int64(HashBool(v&1 == 1)) != bo {
			t.Errorf("%d: Go %d %d %d %d; extension %d %d %d %d", v,
				int64(HashInt64(v)), int64(HashInt32(int32(v))), int64(HashInt16(int16(v))), int64(HashBool(v&1 == 1)),
				b, i, s, bo)
		}
	}
}

// goldenSizes are member counts that land on every kind and on both sides
// of each switch: exact to registers, SPARSE to FULL, and hll_cardinality's
// linear counting to its raw estimate (at 2.5·m).
func goldenSizes(tb testing.TB, set Settings) []int {
	limit := set.explicitLimit()
	full := 0
	s := mustNew(tb, set)
	for i := 0; i < 200_000 && full == 0; i++ {
		s.Add(HashInt64(int64(i)))
		if s.Kind() == KindFull {
			full = i + 1
		}
	}
	m := set.registers()
	sizes := []int{0, 1, 2, limit, limit + 1, (limit + full) / 2, full - 1, full,
		m*5/2 - m/10, m*5/2 + m/10, 50_000}
	slices.Sort(sizes)
	return slices.Compact(slices.DeleteFunc(sizes, func(n int) bool { return n < 0 }))
}

func hashesOf(n int) []int64 {
	h := make([]int64, n)
	for i := range h {
		h[i] = int64(HashInt64(int64(i)))
	}
	return h
}

// checkExtensionBytes checks byte strings the extension returned: Go
// parses each and writes the same bytes back, and ClassicEstimate is
// hll_cardinality's answer. One query for all of them.
func checkExtensionBytes(t *testing.T, pool *pgxpool.Pool, labels []string, all [][]byte) {
	t.Helper()
	var cards []*float64
	err := pool.QueryRow(ctxFor(t), `SELECT array_agg(hll_cardinality(b::hll) ORDER BY i)
		FROM unnest($1::bytea[]) WITH ORDINALITY u(b, i)`, all).Scan(&cards)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range all {
		s, err := Parse(b)
		if err != nil {
			t.Errorf("%s: Parse of the extension's bytes: %v", labels[i], err)
			continue
		}
		if again := mustBytes(t, s); !bytes.Equal(again, b) {
			t.Errorf("%s: round trip changed the extension's %d bytes to %d", labels[i], len(b), len(again))
		}
		got, ok := s.ClassicEstimate()
		switch card := cards[i]; {
		case card == nil || !ok:
			if card != nil || ok {
				t.Errorf("%s: hll_cardinality %v; ClassicEstimate %v, %v", labels[i], card, got, ok)
			}
		case math.IsNaN(got) && math.IsNaN(*card):
		case math.Abs(got-*card) > 1e-9*max(1, *card) || math.IsNaN(got) != math.IsNaN(*card):
			t.Errorf("%s: ClassicEstimate %v; hll_cardinality %v", labels[i], got, *card)
		}
	}
}

// validate has the extension read Go's bytes through the type's input
// function, which checks them as it checks any hll literal, and write
// them back. One query for all of them.
func validate(t *testing.T, pool *pgxpool.Pool, labels []string, all [][]byte) {
	t.Helper()
	lits := make([]string, len(all))
	for i, b := range all {
		lits[i] = `\x` + hex.EncodeToString(b)
	}
	var back [][]byte
	err := pool.QueryRow(ctxFor(t), `SELECT array_agg(hll_send(l::hll) ORDER BY i)
		FROM unnest($1::text[]) WITH ORDINALITY u(l, i)`, lits).Scan(&back)
	if err != nil {
		t.Fatalf("the extension refuses Go's bytes: %v", err)
	}
	for i := range all {
		if !bytes.Equal(back[i], all[i]) {
			t.Errorf("%s: the extension read Go's bytes back differently", labels[i])
		}
	}
}

func TestGoldenSketches(t *testing.T) {
	t.Parallel()
	pool, ctx := goldenDB(t), ctxFor(t)
	var labels []string
	var ours, theirs [][]byte
	for _, set := range testSettings {
		for _, n := range goldenSizes(t, set) {
			label := fmt.Sprintf("%+v, %d members", set, n)
			hashes := hashesOf(n)
			s := mustNew(t, set)
			for _, h := range hashes {
				s.Add(uint64(h))
			}
			var want []byte
			err := pool.QueryRow(ctx, `SELECT hll_send(coalesce(hll_add_agg(h::hll_hashval, $2, $3, $4, $5),
				hll_empty($2, $3, $4, $5))) FROM unnest($1::int8[]) h`,
				hashes, set.Log2m, set.Regwidth, set.Expthresh, boolInt(set.Sparse)).Scan(&want)
			if err != nil {
				t.Fatal(err)
			}
			got := mustBytes(t, s)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: Go %v of %d bytes; hll_add_agg %x.. of %d bytes", label, s.Kind(), len(got), want[:min(len(want), 3)], len(want))
			}
			labels, ours, theirs = append(labels, label), append(ours, got), append(theirs, want)
			t.Logf("%s: %v; Estimate %d, ClassicEstimate %.1f", label, s.Kind(), s.Estimate(), first(s.ClassicEstimate()))
		}
	}
	validate(t, pool, labels, ours)
	// Registers no stream of this size reaches: all 27 takes the
	// large-range correction; all 31 makes it the log of a negative
	// number, NaN in both.
	for _, v := range []byte{27, 31} {
		regs := make([]uint8, DefaultSettings().registers())
		for i := range regs {
			regs[i] = v
		}
		s := &Sketch{set: DefaultSettings(), state: KindFull, regs: regs, filled: len(regs)}
		labels, theirs = append(labels, fmt.Sprintf("every register %d", v)), append(theirs, mustBytes(t, s))
	}
	checkExtensionBytes(t, pool, labels, theirs)
}

// TestGoldenMembers builds sketches from members in SQL, as an
// application would, and in Go.
func TestGoldenMembers(t *testing.T) {
	t.Parallel()
	pool, ctx := goldenDB(t), ctxFor(t)
	for _, n := range []int{len(hashMembers), 3000, 20000} {
		members := append([][]byte(nil), hashMembers...)
		for i := len(members); i < n; i++ {
			members = append(members, fmt.Appendf(nil, "visitor:%d", i))
		}
		s := NewDefault()
		for _, m := range members {
			s.Add(Hash(m))
		}
		var want []byte
		if err := pool.QueryRow(ctx, `SELECT hll_send(hll_add_agg(hll_hash_bytea(m), 14, 5, -1, 1))
			FROM unnest($1::bytea[]) m`, members).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := mustBytes(t, s); !bytes.Equal(got, want) {
			t.Errorf("%d members: Go %v of %d bytes; SQL %d bytes", n, s.Kind(), len(got), len(want))
		}
	}
}

func TestGoldenUnion(t *testing.T) {
	t.Parallel()
	pool, ctx := goldenDB(t), ctxFor(t)
	ranges := []struct {
		name     string
		from, to int
	}{
		{"empty", 0, 0},
		{"explicit", 0, 700},
		{"explicit2", 500, 1200}, // with "explicit": 1,200 distinct, still exact
		{"explicit3", 650, 1350}, // with "explicit": 1,350, over the limit
		{"sparse", 300, 3000},
		{"full", 2000, 20000},
	}
	var labels []string
	var as, bs, ours [][]byte
	for _, set := range []Settings{DefaultSettings(), testSettings[4]} {
		built := make([][]byte, len(ranges))
		for i, r := range ranges {
			built[i] = mustBytes(t, fill(mustNew(t, set), r.from, r.to))
		}
		for i, a := range ranges {
			for j, b := range ranges {
				x, _ := Parse(built[i])
				y, _ := Parse(built[j])
				if err := x.Union(y); err != nil {
					t.Fatal(err)
				}
				labels = append(labels, fmt.Sprintf("%+v: %s+%s", set, a.name, b.name))
				as, bs, ours = append(as, built[i]), append(bs, built[j]), append(ours, mustBytes(t, x))
			}
		}
	}
	var theirs [][]byte
	if err := pool.QueryRow(ctx, `SELECT array_agg(hll_send(hll_union(a::hll, b::hll)) ORDER BY i)
		FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY u(a, b, i)`, as, bs).Scan(&theirs); err != nil {
		t.Fatal(err)
	}
	for i := range ours {
		if !bytes.Equal(ours[i], theirs[i]) {
			t.Errorf("%s: Go union of %d bytes; hll_union %d bytes", labels[i], len(ours[i]), len(theirs[i]))
		}
	}
	checkExtensionBytes(t, pool, labels, theirs)
	// UNDEFINED absorbs anything, in both.
	undef := []byte{0x10, 0x8e, 0x7f}
	x := fill(NewDefault(), 0, 10)
	var want []byte
	if err := pool.QueryRow(ctx, `SELECT hll_send(hll_union($1::bytea::hll, $2::bytea::hll))`, mustBytes(t, x), undef).Scan(&want); err != nil {
		t.Fatal(err)
	}
	u, _ := Parse(undef)
	if err := x.Union(u); err != nil {
		t.Fatal(err)
	}
	if got := mustBytes(t, x); !bytes.Equal(got, want) {
		t.Errorf("union with UNDEFINED: Go %x; extension %x", got, want)
	}
	checkExtensionBytes(t, pool, []string{"UNDEFINED"}, [][]byte{want})
}

// TestGoldenUnionAgg stores Go's sketches in an hll(14,5,-1,1) column
// (through the type's input function, which checks them and the typmod)
// and unions them in SQL.
func TestGoldenUnionAgg(t *testing.T) {
	t.Parallel()
	pool, ctx := goldenDB(t), ctxFor(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE sketches (bucket int PRIMARY KEY, sketch hll(14, 5, -1, 1) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	all := NewDefault()
	for bucket, r := range [][2]int{{0, 100}, {50, 900}, {800, 4000}, {3000, 30000}, {0, 0}} {
		s := fill(NewDefault(), r[0], r[1])
		if err := all.Union(s); err != nil {
			t.Fatal(err)
		}
		lit := `\x` + hex.EncodeToString(mustBytes(t, s))
		if _, err := pool.Exec(ctx, `INSERT INTO sketches VALUES ($1, $2::text::hll)`, bucket, lit); err != nil {
			t.Fatalf("store bucket %d: %v", bucket, err)
		}
	}
	var want []byte
	if err := pool.QueryRow(ctx, `SELECT hll_send(hll_union_agg(sketch)) FROM sketches`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got := mustBytes(t, all); !bytes.Equal(got, want) {
		t.Errorf("Go union of the buckets %v of %d bytes; hll_union_agg %d bytes", all.Kind(), len(got), len(want))
	}
	checkExtensionBytes(t, pool, []string{"hll_union_agg"}, [][]byte{want})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func first(v float64, _ bool) float64 { return v }
