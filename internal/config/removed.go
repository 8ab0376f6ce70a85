package config

import (
	"log/slog"

	"github.com/caarlos0/env/v11"
)

// removed lists the variables counterd no longer reads, each with what to
// do instead. One still set after an upgrade would otherwise be ignored
// without a word, and the daemon would run as the operator did not ask.
var removed = []struct{ name, instead string }{
	{"COUNTERD_HOT_STRATEGY", "keys are counted exactly unless COUNTERD_SAMPLE_KEYS names them: " +
		"for the old default (sample), set COUNTERD_SAMPLE_KEYS=*; exact needs nothing"},
}

// WarnRemoved logs one warning for each removed variable environ sets.
// Call it once at start.
func WarnRemoved(log *slog.Logger, environ []string) {
	vars := env.ToMap(environ)
	for _, r := range removed {
		if _, ok := vars[r.name]; ok {
			log.Warn(r.name+" is no longer read and is ignored", "var", r.name, "instead", r.instead)
		}
	}
}
