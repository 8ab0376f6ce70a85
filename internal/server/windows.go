package server

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/pending"
	"github.com/counterd/counterd/internal/resp"
	"github.com/counterd/counterd/internal/windows"
)

// Time window reads: COUNT key SINCE span, RANGE key width n and TOP
// pattern width n limit. Each reads what PostgreSQL has plus what this
// daemon holds, as GET does, with buckets picked by the accept clock.

// maxBuckets bounds RANGE's and TOP's bucket count, so one command's
// reply and read stay bounded whatever the retention.
const maxBuckets = 100_000

// maxTop bounds TOP's limit.
const maxTop = 10_000

// errWindowInMulti refuses window reads inside MULTI: a transaction's
// reads are answered at their position in it; time window reads are not
// (yet), so they are refused rather than answered as of EXEC.
const errWindowInMulti = "ERR COUNT ... SINCE, RANGE and TOP are not allowed inside MULTI; send them after EXEC"

// errNoWindows answers a window read when COUNTERD_WINDOWS is empty.
const errNoWindows = "ERR no time windows are configured (COUNTERD_WINDOWS)"

// countCmd answers COUNT key SINCE span and a COUNT of 3 or more
// arguments that is not that (COUNT key is parseCount's).
func (s *Server) countCmd(ctx context.Context, out []byte, args [][]byte) []byte {
	switch {
	case len(args) == 4 && is(args[2], "SINCE"):
		return s.countSince(ctx, out, args[1], args[3])
	}
	s.m.commandErrors.Inc()
	return resp.AppendError(out, "ERR syntax error: COUNT key [SINCE span]")
}

// countSince answers COUNT key SINCE span: the key's count over the
// current bucket and the ⌈span/width⌉−1 before it, of the finest of its
// widths whose retention covers span; replied as COUNT is.
func (s *Server) countSince(ctx context.Context, out, key, spanArg []byte) []byte {
	if msg := s.windowKey(key); msg != "" {
		return s.windowError(out, msg)
	}
	span, err := windows.ParseDuration(string(spanArg))
	if err != nil {
		return s.windowError(out, "ERR invalid span: "+err.Error())
	}
	w, n, err := s.buf.Windows().Span(string(key), span)
	if err != nil {
		return s.windowError(out, "ERR "+err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	_, est, err := s.buf.Buckets(ctx, string(key), w.Kind, n)
	if err != nil {
		return s.windowError(out, fmt.Sprintf("ERR read buckets: %v", err))
	}
	sum := new(big.Int)
	var v float64
	for _, e := range est {
		sum.Add(sum, big.NewInt(e.Total))
		v += e.Var
	}
	if !sum.IsInt64() {
		return s.windowError(out, fmt.Sprintf("ERR read buckets: count of %q since %s is %s, beyond int64", key, spanArg, sum))
	}
	return appendCount(out, pending.Estimate{Total: sum.Int64(), Var: v})
}

// rangeCmd answers RANGE key width n: n pairs [bucket_start_unix, total],
// oldest first, the last being the current bucket; empty buckets are 0.
func (s *Server) rangeCmd(ctx context.Context, out []byte, args [][]byte) []byte {
	key := args[1]
	if msg := s.windowKey(key); msg != "" {
		return s.windowError(out, msg)
	}
	k, n, msg := s.widthAndCount(args[2], args[3])
	if msg != "" {
		return s.windowError(out, msg)
	}
	ret, ok := s.buf.Windows().Retention(string(key), k)
	if !ok {
		return s.windowError(out, fmt.Sprintf("ERR key %q has no %v window (COUNTERD_WINDOWS)", key, k))
	}
	if msg := beyond(k, n, ret, "the key's"); msg != "" {
		return s.windowError(out, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	from, est, err := s.buf.Buckets(ctx, string(key), k, n)
	if err != nil {
		return s.windowError(out, fmt.Sprintf("ERR read buckets: %v", err))
	}
	width := int64(k.Width() / time.Second)
	out = resp.AppendArrayHeader(out, len(est))
	for i, e := range est {
		out = resp.AppendArrayHeader(out, 2)
		out = resp.AppendInt(out, from+int64(i)*width)
		out = resp.AppendInt(out, e.Total)
	}
	return out
}

// top answers TOP pattern width n limit: up to limit pairs [key, total],
// largest first (ties by key), of the keys matching pattern (a prefix
// followed by *) by their count over the last n buckets of width.
func (s *Server) top(ctx context.Context, out []byte, args [][]byte) []byte {
	if s.buf.Windows() == nil {
		return s.windowError(out, errNoWindows)
	}
	pat := string(args[1])
	prefix, ok := strings.CutSuffix(pat, "*")
	if !ok || strings.ContainsAny(prefix, "*?") {
		return s.windowError(out, fmt.Sprintf("ERR TOP takes a prefix pattern such as post:* (a prefix, then one * at the end), not %q", pat))
	}
	k, n, msg := s.widthAndCount(args[2], args[3])
	if msg != "" {
		return s.windowError(out, msg)
	}
	limit, ok := resp.ParseInt(args[4])
	if !ok || limit < 1 || limit > maxTop {
		return s.windowError(out, fmt.Sprintf("ERR limit must be an integer 1..%d", maxTop))
	}
	ret, ok := s.buf.Windows().Longest(k)
	if !ok {
		return s.windowError(out, fmt.Sprintf("ERR no key has a %v window (COUNTERD_WINDOWS)", k))
	}
	if msg := beyond(k, n, ret, "the longest"); msg != "" {
		return s.windowError(out, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	top, err := s.buf.Top(ctx, prefix, k, n, int(limit))
	if err != nil {
		return s.windowError(out, fmt.Sprintf("ERR read buckets: %v", err))
	}
	out = resp.AppendArrayHeader(out, len(top))
	for _, t := range top {
		out = resp.AppendArrayHeader(out, 2)
		out = resp.AppendBulkString(out, t.Key)
		out = resp.AppendInt(out, t.Total)
	}
	return out
}

// windowKey checks a key for a window read, returning the error reply.
func (s *Server) windowKey(key []byte) string {
	if err := checkKey(key); err != nil {
		return err.Error()
	}
	if s.buf.Windows() == nil {
		return errNoWindows
	}
	if s.buf.Windows().Match(string(key)) == nil {
		return fmt.Sprintf("ERR key %q has no time windows (COUNTERD_WINDOWS)", key)
	}
	return ""
}

// widthAndCount parses a width name and a bucket count.
func (s *Server) widthAndCount(width, count []byte) (change.Kind, int, string) {
	k, ok := change.WindowKind(strings.ToLower(string(width)))
	if !ok {
		return 0, 0, fmt.Sprintf("ERR unknown width %q (minute, hour or day)", width)
	}
	n, ok := resp.ParseInt(count)
	if !ok || n < 1 || n > maxBuckets {
		return 0, 0, fmt.Sprintf("ERR bucket count must be an integer 1..%d", maxBuckets)
	}
	return k, int(n), ""
}

// beyond words why n buckets of kind k reach past retention ret, or "".
// n buckets end with the current one, so they reach (n-1) widths plus the
// part of the current one before now into the past; n widths is the
// bound.
func beyond(k change.Kind, n int, ret time.Duration, whose string) string {
	if span := time.Duration(n) * k.Width(); span > ret {
		return "ERR " + strconv.Itoa(n) + " " + k.String() + " buckets span " + windows.FormatDuration(span) +
			", beyond " + whose + " " + k.String() + " retention of " + windows.FormatDuration(ret)
	}
	return ""
}

func (s *Server) windowError(out []byte, msg string) []byte {
	s.m.commandErrors.Inc()
	return resp.AppendError(out, msg)
}
