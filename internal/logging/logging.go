// Package logging builds the slog logger both binaries use, from the level
// and format their configuration names.
package logging

import (
	"io"
	"log/slog"
)

// New returns a logger writing text or JSON records at level to w.
func New(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
