package server

import "github.com/VictoriaMetrics/metrics"

type serverMetrics struct {
	commands       *metrics.Counter
	commandErrors  *metrics.Counter
	protocolErrors *metrics.Counter
}

func newServerMetrics(set *metrics.Set, s *Server) serverMetrics {
	set.NewGauge(`counterd_connections`, func() float64 { return float64(s.Conns()) })
	return serverMetrics{
		commands:       set.NewCounter(`counterd_commands_total`),
		commandErrors:  set.NewCounter(`counterd_command_errors_total`),
		protocolErrors: set.NewCounter(`counterd_protocol_errors_total`),
	}
}
