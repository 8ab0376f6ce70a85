package server

import "github.com/VictoriaMetrics/metrics"

type serverMetrics struct {
	sampledOut      *metrics.Counter
	sampledRecorded *metrics.Counter
	commands        *metrics.Counter
	commandErrors   *metrics.Counter
	protocolErrors  *metrics.Counter
	acceptErrors    *metrics.Counter
	refused         *metrics.Counter
}

func newServerMetrics(set *metrics.Set, s *Server) serverMetrics {
	set.NewGauge(`counterd_connections`, func() float64 { return float64(s.Conns()) })
	if s.opts.Hot != nil {
		set.NewGauge(`counterd_hot_keys`, func() float64 { return float64(s.opts.Hot.HotCount()) })
	}
	return serverMetrics{
		sampledOut:      set.NewCounter(`counterd_sampled_out_total`),
		sampledRecorded: set.NewCounter(`counterd_sampled_recorded_total`),
		commands:        set.NewCounter(`counterd_commands_total`),
		commandErrors:   set.NewCounter(`counterd_command_errors_total`),
		protocolErrors:  set.NewCounter(`counterd_protocol_errors_total`),
		acceptErrors:    set.NewCounter(`counterd_accept_errors_total`),
		refused:         set.NewCounter(`counterd_connections_refused_total`),
	}
}
