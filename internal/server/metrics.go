package server

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/counterd/counterd/internal/exposition"
)

type serverMetrics struct {
	sampledOut      *metrics.Counter
	sampledRecorded *metrics.Counter
	commands        *metrics.Counter
	commandErrors   *metrics.Counter
	protocolErrors  *metrics.Counter
	acceptErrors    *metrics.Counter
	refused         *metrics.Counter
	uniquesKnown    *metrics.Counter
}

func newServerMetrics(set *metrics.Set, s *Server) serverMetrics {
	exposition.Gauge(set, `counterd_connections`, "Client connections open now.",
		func() float64 { return float64(s.Conns()) })
	if s.opts.Hot != nil {
		exposition.Gauge(set, `counterd_hot_keys`, "Keys the hotness tracker counts as hot now.",
			func() float64 { return float64(s.opts.Hot.HotCount()) })
	}
	return serverMetrics{
		sampledOut: exposition.Counter(set, `counterd_sampled_out_total`,
			"Increments of hot COUNTERD_SAMPLE_KEYS keys that sampling dropped."),
		sampledRecorded: exposition.Counter(set, `counterd_sampled_recorded_total`,
			"Increments of hot COUNTERD_SAMPLE_KEYS keys that sampling recorded, scaled up."),
		commands: exposition.Counter(set, `counterd_commands_total`,
			"Commands executed."),
		commandErrors: exposition.Counter(set, `counterd_command_errors_total`,
			"Commands answered with an error reply."),
		protocolErrors: exposition.Counter(set, `counterd_protocol_errors_total`,
			"Connections closed for a malformed request."),
		acceptErrors: exposition.Counter(set, `counterd_accept_errors_total`,
			"Failed accepts on the socket (such as no file descriptors left), retried with backoff."),
		refused: exposition.Counter(set, `counterd_connections_refused_total`,
			"Connections refused past COUNTERD_MAX_CONNS."),
		uniquesKnown: exposition.Counter(set, `counterd_uniques_known_total`,
			"PFADD members this daemon had already journaled and confirmed for their key, answered 0 and not journaled again."),
	}
}
