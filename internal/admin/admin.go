// Package admin serves counterd's operational HTTP endpoints: /metrics in
// Prometheus text format, /healthz (the process is up), /readyz (the
// database answers), /acceptingz (increments are accepted, whatever the
// database does) and, when enabled, /debug/pprof. It binds to loopback
// by default because metrics name keys nobody outside the host needs to see.
package admin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

// Options say what the endpoints report.
type Options struct {
	// Sets are served on /metrics.
	Sets []*metrics.Set
	// Ready answers /readyz: whether the daemon is ready and anything an
	// operator should know either way; nil means always ready.
	Ready func(context.Context) (string, error)
	// Accepting answers /acceptingz: nil while increments are accepted,
	// else why not. Nil leaves /acceptingz out.
	Accepting func() error
	// Profile adds Go's /debug/pprof endpoints, for profiling a running
	// daemon.
	Profile bool
}

// Handler returns the mux. ready reports whether the daemon is ready and
// anything an operator should know either way; nil means always ready. profile adds Go's /debug/pprof
// endpoints, for profiling a running daemon.
func Handler(sets []*metrics.Set, ready func(context.Context) (string, error), profile bool) http.Handler {
	return New(Options{Sets: sets, Ready: ready, Profile: profile})
}

// New returns the mux for opts.
func New(opts Options) http.Handler {
	sets, ready, profile := opts.Sets, opts.Ready, opts.Profile
	mux := http.NewServeMux()
	if profile {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_ = exposition.Write(w, sets) // a failed write is the scraper gone
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		var note string
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			var err error
			if note, err = ready(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error()+note, http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready"+note)
	})
	if opts.Accepting != nil {
		// A probe of the accept path alone: a Kubernetes readiness probe
		// on /readyz would take the app's pods out of service during a
		// PostgreSQL outage the journal rides out.
		mux.HandleFunc("GET /acceptingz", func(w http.ResponseWriter, _ *http.Request) {
			if err := opts.Accepting(); err != nil {
				http.Error(w, "not accepting: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "accepting")
		})
	}
	return mux
}

// Serve listens on addr and serves h until ctx ends.
func Serve(ctx context.Context, addr string, h http.Handler) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	// Serve returns ErrServerClosed once ctx ends and Shutdown runs.
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return ln.Addr(), nil
}
