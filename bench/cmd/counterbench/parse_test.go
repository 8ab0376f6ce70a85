package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseBenchmarkCSV(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out string
		rps       float64
		p50, p99  time.Duration
		ok        bool
	}{
		{"redis 7", `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"incr post:__rand_int__","385542.19","1.847","0.256","1.191","6.199","10.567","10.847"
`, 385542.19, 1191 * time.Microsecond, 10567 * time.Microsecond, true},
		{"old, no header", `"INCR","95238.10"` + "\n", 95238.10, 0, 0, true},
		{"nothing", "WARNING: Could not fetch server CONFIG\n", 0, 0, 0, false},
		{"empty", "", 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseBenchmarkCSV([]byte(tc.out))
			if (err == nil) != tc.ok {
				t.Fatalf("err %v; want ok=%v", err, tc.ok)
			}
			if tc.ok && (s.rps != tc.rps || s.p50 != tc.p50 || s.p99 != tc.p99) {
				t.Fatalf("got %+v; want rps %v p50 %v p99 %v", s, tc.rps, tc.p50, tc.p99)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	m, err := parseMetrics(strings.NewReader(`# HELP x
counterd_flush_batch_keys_bucket{vmrange="1.000e+00...1.136e+00"} 3
counterd_flush_batch_keys_sum 1234
counterd_flush_batch_keys_count 7
counterd_increments_accepted_total 5e+06
garbage
`))
	if err != nil {
		t.Fatal(err)
	}
	if m["counterd_flush_batch_keys_sum"] != 1234 || m["counterd_increments_accepted_total"] != 5e6 || len(m) != 3 {
		t.Fatalf("got %v; want the three unlabelled samples", m)
	}
}

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	f := func(in, want string) {
		t.Helper()
		got, err := withSearchPath(in, "bench")
		if err != nil || got != want {
			t.Errorf("withSearchPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	f("postgres://u@h/db", "postgres://u@h/db?search_path=bench")
	f("postgres://u@/db?host=/tmp/s&search_path=other", "postgres://u@/db?host=%2Ftmp%2Fs&search_path=bench")
	f("host=/tmp dbname=x", "host=/tmp dbname=x search_path=bench")
	// counterd's connections get an application_name the same way.
	got, err := withParam("postgres://u@h/db?search_path=bench", "application_name", "counterbench-counterd")
	if want := "postgres://u@h/db?application_name=counterbench-counterd&search_path=bench"; err != nil || got != want {
		t.Errorf("withParam = %q, %v; want %q", got, err, want)
	}
}

func TestCommand(t *testing.T) {
	t.Parallel()
	f := func(environ []string, want string) {
		t.Helper()
		b := &bench{environ: append([]string{"HOME=/root", "DATABASE_URL=secret"}, environ...)}
		if got := b.command(); got != want {
			t.Errorf("environ %v: got %q; want %q", environ, got, want)
		}
	}
	f([]string{"COUNTERBENCH_KEYS=hot,zipf", "COUNTERD_FSYNC=always", "COUNTERBENCH_OUT=my results"},
		"COUNTERBENCH_KEYS=hot,zipf COUNTERBENCH_OUT='my results' COUNTERD_FSYNC=always make bench")
	// Defaults, however spelled, are left out; so are settings the run
	// gives counterd itself and variables counterbench does not read.
	f([]string{"COUNTERBENCH_DURATION=5000ms", "COUNTERBENCH_CLIENTS=64,32,8,1,1", "COUNTERBENCH_KEYS=Hot,zipf,uniform",
		"COUNTERBENCH_APPROACHES=all", "COUNTERBENCH_SECTIONS=", "COUNTERBENCH_SUSTAIN_RATE=150000", "COUNTERBENCH_REDIS_SERVER=",
		"COUNTERD_SOCKET=/tmp/x.sock", "COUNTERBENCH_NOTHING=1"}, "make bench")
	f([]string{"COUNTERBENCH_SUSTAIN_DURATION=5s", "COUNTERBENCH_CLIENTS=8,1"},
		"COUNTERBENCH_CLIENTS=8,1 COUNTERBENCH_SUSTAIN_DURATION=5s make bench")
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := newProgress(&b)
	p.total = 2
	p.step("naive %s c=%d", "hot", 1)
	p.note("starting counterd")
	p.step("atomic hot c=1")
	p.finish()
	want := "[1/2] naive hot c=1 …\nstarting counterd\n[2/2] atomic hot c=1 …\n"
	if b.String() != want {
		t.Fatalf("got %q; want %q", b.String(), want)
	}
	var tty bytes.Buffer
	p = &progress{w: &tty, tty: true, total: 2}
	p.step("a long first line")
	p.step("short")
	p.finish()
	if want := "\r[1/2] a long first line …\r[2/2] short …            \n"; tty.String() != want {
		t.Fatalf("terminal: got %q; want %q", tty.String(), want)
	}
}
