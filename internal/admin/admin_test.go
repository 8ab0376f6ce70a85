package admin_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/counterd/counterd/internal/admin"
)

func TestAcceptingz(t *testing.T) {
	t.Parallel()
	f := func(accepting func() error, wantCode int, wantBody string) {
		t.Helper()
		h := admin.New(admin.Options{Accepting: accepting})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acceptingz", nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != wantCode || !strings.Contains(string(body), wantBody) {
			t.Fatalf("GET /acceptingz: got %d %q; want %d containing %q", rec.Code, body, wantCode, wantBody)
		}
	}
	f(func() error { return nil }, http.StatusOK, "accepting")
	f(func() error { return errors.New("journal full") }, http.StatusServiceUnavailable, "not accepting: journal full")
	f(nil, http.StatusNotFound, "") // rollup's scheduler has no accept path
}

// Handler, as rollup calls it, serves what it did before /acceptingz.
func TestHandlerWithoutAccepting(t *testing.T) {
	t.Parallel()
	h := admin.Handler(nil, nil, false)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/acceptingz": 404, "/debug/pprof/": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: got %d; want %d", path, rec.Code, want)
		}
	}
}
