package server

import (
	"errors"
	"os"

	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

// Why a connection was closed for its output, as Redis's
// client-output-buffer-limit does: the metric's reason label.
const (
	// reasonOutputLimit: the replies pending for the connection passed
	// Options.OutputLimit.
	reasonOutputLimit = "output_limit"
	// reasonWriteTimeout: the client did not take its replies within
	// Options.WriteTimeout.
	reasonWriteTimeout = "write_timeout"
)

// outputMetrics count connections closed for their output, by reason.
type outputMetrics struct {
	outputLimit  *metrics.Counter
	writeTimeout *metrics.Counter
}

const disconnectedHelp = "Connections closed for their output, by reason: output_limit (COUNTERD_CLIENT_OUTPUT_LIMIT), write_timeout (COUNTERD_CLIENT_WRITE_TIMEOUT)."

func newOutputMetrics(set *metrics.Set) outputMetrics {
	return outputMetrics{
		outputLimit:  exposition.Counter(set, `counterd_clients_disconnected_total{reason="`+reasonOutputLimit+`"}`, disconnectedHelp),
		writeTimeout: exposition.Counter(set, `counterd_clients_disconnected_total{reason="`+reasonWriteTimeout+`"}`, disconnectedHelp),
	}
}

// errOutputLimit ends a session whose pending replies passed the limit.
var errOutputLimit = errors.New("replies pending past the output limit")

// overLimit reports whether the replies pending for a connection, held
// bytes the client has not taken yet and those of c.out, passed
// Options.OutputLimit; if so it counts and logs the disconnection. A
// connection stops reading while half the limit is held, so only one
// command's very large reply (MGET of a huge key list, say) can get there.
func (c *session) overLimit(held int) bool {
	n := held + len(c.out)
	if n <= c.s.opts.OutputLimit {
		return false
	}
	c.s.out.outputLimit.Inc()
	c.s.opts.Logger.Warn("closing connection: replies pending past COUNTERD_CLIENT_OUTPUT_LIMIT",
		"conn", c.conn.id, "pending_bytes", n, "limit", c.s.opts.OutputLimit)
	return true
}

// readStop reports whether a connection holding held bytes of replies
// its client has not taken must read and run nothing more until the
// client takes some: past half Options.OutputLimit. It pushes back on a
// client that pipelines without reading, so only one command's very large
// reply can reach the limit itself.
func (c *session) readStop(held int) bool { return held > c.s.opts.OutputLimit/2 }

// writeFailed counts and logs a write that ended the connection because
// the client stopped reading. Other write errors (the client went away,
// shutdown closed it) are ordinary ends, not logged as warnings.
func (c *session) writeFailed(err error, pending int) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.writeTimedOut(pending)
	}
}

// writeTimedOut counts and logs a connection closed because its client
// took none of its pending replies within Options.WriteTimeout.
func (c *session) writeTimedOut(pending int) {
	c.s.out.writeTimeout.Inc()
	c.s.opts.Logger.Warn("closing connection: client did not read its replies within COUNTERD_CLIENT_WRITE_TIMEOUT",
		"conn", c.conn.id, "pending_bytes", pending, "timeout", c.s.opts.WriteTimeout)
}
