package server

import (
	"context"

	"github.com/counterd/counterd/internal/change"
	"github.com/counterd/counterd/internal/hll"
	"github.com/counterd/counterd/internal/resp"
	"github.com/counterd/counterd/internal/windows"
)

// PFCOUNT key [key ...] SINCE span: the estimated number of distinct
// members added to the keys over the span, from the per-bucket sketches
// a PFADD to a key COUNTERD_WINDOWS covers also adds to. Each key's
// buckets are those COUNT key SINCE span reads (the finest of its widths
// whose retention covers the span: the current bucket and ⌈span/width⌉−1
// before it); the reply is the estimate of the union of every key's
// buckets, stored and held by this daemon, never a sum of counts, so a
// member added in two buckets, or to two keys, counts once.

// spanRead is one width and bucket count, and the keys read with them.
type spanRead struct {
	kind change.Kind
	n    int
	keys []string
}

// pfcountSince answers PFCOUNT key [key ...] SINCE span.
func (s *Server) pfcountSince(ctx context.Context, out []byte, keyArgs [][]byte, spanArg []byte) []byte {
	reads, msg := s.spanReads(keyArgs, spanArg)
	if msg != "" {
		return s.windowError(out, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	u := hll.NewDefault()
	for _, r := range reads {
		stored, held, err := s.buf.BucketMembers(ctx, r.kind, r.keys, r.n)
		if err == nil {
			err = addSketches(u, r.keys, stored, held)
		}
		if err != nil {
			return s.windowError(out, "ERR read unique members: "+err.Error())
		}
	}
	return resp.AppendInt(out, int64(u.Estimate()))
}

// spanReads checks the keys and span of PFCOUNT ... SINCE span and groups
// the keys by the width and bucket count each is read with; it returns
// the error reply, "" when all is well.
func (s *Server) spanReads(keyArgs [][]byte, spanArg []byte) ([]spanRead, string) {
	span, err := windows.ParseDuration(string(spanArg))
	if err != nil {
		return nil, "ERR invalid span: " + err.Error()
	}
	var reads []spanRead
	for _, k := range keyArgs {
		if msg := s.windowKey(k); msg != "" {
			return nil, msg
		}
		key := string(k)
		w, n, err := s.buf.Windows().Span(key, span)
		if err != nil {
			return nil, "ERR " + err.Error()
		}
		reads = addSpanRead(reads, w.Kind, n, key)
	}
	return reads, ""
}

// addSpanRead adds key to the read of kind k and n buckets, or a new one.
func addSpanRead(reads []spanRead, k change.Kind, n int, key string) []spanRead {
	for i := range reads {
		if reads[i].kind == k && reads[i].n == n {
			reads[i].keys = append(reads[i].keys, key)
			return reads
		}
	}
	return append(reads, spanRead{kind: k, n: n, keys: []string{key}})
}
