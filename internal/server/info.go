package server

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/counterd/counterd/internal/version"
)

// infoSections are INFO's sections in Redis's order; INFO with no
// argument, default, all or everything gives them all.
var infoSections = []struct {
	name  string
	write func(s *Server, w *infoWriter)
}{
	{"server", (*Server).infoServer},
	{"clients", (*Server).infoClients},
	{"memory", (*Server).infoMemory},
	{"persistence", (*Server).infoPersistence},
	{"stats", (*Server).infoStats},
	{"replication", (*Server).infoReplication},
	{"cpu", (*Server).infoCPU},
	{"cluster", (*Server).infoCluster},
	{"keyspace", (*Server).infoKeyspace},
}

// infoWriter builds INFO's text: "# Section" headers and "field:value"
// lines, CRLF-terminated, a blank line between sections.
type infoWriter struct{ b strings.Builder }

func (w *infoWriter) section(title string) {
	if w.b.Len() > 0 {
		w.b.WriteString("\r\n")
	}
	w.b.WriteString("# " + title + "\r\n")
}

func (w *infoWriter) field(k string, v any) { fmt.Fprintf(&w.b, "%s:%v\r\n", k, v) }

// info answers INFO [section ...]. Unknown sections are left out, as in
// Redis.
func (s *Server) info(args [][]byte) string {
	all := len(args) == 0
	for _, a := range args {
		if is(a, "all") || is(a, "everything") || is(a, "default") {
			all = true
		}
	}
	var w infoWriter
	for _, sec := range infoSections {
		want := all
		for _, a := range args {
			want = want || is(a, sec.name)
		}
		if want {
			sec.write(s, &w)
		}
	}
	return w.b.String()
}

func (s *Server) infoServer(w *infoWriter) {
	up := s.reg.now().Sub(s.reg.started)
	s.reg.mu.Lock()
	socket := s.reg.socket
	s.reg.mu.Unlock()
	exe, _ := os.Executable()
	w.section("Server")
	w.field("redis_version", RedisVersion)
	w.field("server_name", "counterd")
	w.field("counterd_version", version.Version()) // as --version says
	w.field("redis_mode", "standalone")
	w.field("os", runtime.GOOS+" "+runtime.GOARCH)
	w.field("arch_bits", strconv.IntSize)
	w.field("go_version", runtime.Version())
	w.field("process_id", os.Getpid())
	w.field("tcp_port", 0)
	w.field("unix_socket", socket)
	w.field("server_time_usec", s.reg.now().UnixMicro())
	w.field("uptime_in_seconds", int64(up.Seconds()))
	w.field("uptime_in_days", int64(up/(24*time.Hour)))
	w.field("executable", exe)
	w.field("config_file", "")
}

func (s *Server) infoClients(w *infoWriter) {
	w.section("Clients")
	w.field("connected_clients", s.Conns())
	w.field("maxclients", s.opts.MaxConns)
	w.field("blocked_clients", 0)
	w.field("tracking_clients", 0)
	w.field("pubsub_clients", 0)
}

func (s *Server) infoMemory(w *infoWriter) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.section("Memory")
	w.field("used_memory", ms.HeapAlloc)
	w.field("used_memory_human", humanBytes(ms.HeapAlloc))
	w.field("used_memory_sys", ms.Sys)
	w.field("used_memory_sys_human", humanBytes(ms.Sys))
	w.field("maxmemory", 0)
	w.field("maxmemory_human", "0B")
	w.field("maxmemory_policy", "noeviction")
	w.field("mem_allocator", "go")
	w.field("go_goroutines", runtime.NumGoroutine())
	w.field("go_gc_cycles", ms.NumGC)
}

// humanBytes formats n as Redis's used_memory_human does: 1.50M.
func humanBytes(n uint64) string {
	const unit = 1024
	f := float64(n)
	for _, u := range []string{"B", "K", "M", "G", "T"} {
		if f < unit || u == "T" {
			if u == "B" {
				return strconv.FormatUint(n, 10) + "B"
			}
			return strconv.FormatFloat(f, 'f', 2, 64) + u
		}
		f /= unit
	}
	return ""
}

func (s *Server) infoPersistence(w *infoWriter) {
	st := s.buf.Stats()
	w.section("Persistence")
	w.field("loading", 0)
	w.field("async_loading", 0)
	w.field("aof_enabled", b2i(st.Journaled))
	w.field("counterd_journal_bytes", st.JournalBytes)
	w.field("counterd_ack", map[bool]string{false: "journal", true: "commit"}[s.opts.AckCommit])
	w.field("counterd_pending_keys", st.PendingKeys)
	w.field("counterd_queued_rounds", st.QueuedRounds)
	w.field("counterd_replayed_rounds", st.ReplayedRounds)
}

func (s *Server) infoStats(w *infoWriter) {
	st := s.buf.Stats()
	w.section("Stats")
	w.field("total_connections_received", s.reg.total.Load())
	w.field("total_commands_processed", s.m.commands.Get())
	w.field("rejected_connections", s.m.refused.Get())
	w.field("total_error_replies", s.m.commandErrors.Get())
	w.field("counterd_protocol_errors", s.m.protocolErrors.Get())
	w.field("counterd_increments_accepted", st.Accepted)
	w.field("counterd_increments_rejected", st.Rejected)
	w.field("counterd_flushes", st.Flushes)
	w.field("counterd_flush_errors", st.FlushErrors)
	w.field("counterd_sampled_out", s.m.sampledOut.Get())
	w.field("counterd_sampled_recorded", s.m.sampledRecorded.Get())
	hot := 0
	if s.opts.Hot != nil {
		hot = s.opts.Hot.HotCount()
	}
	w.field("counterd_hot_keys", hot)
}

func (s *Server) infoReplication(w *infoWriter) {
	w.section("Replication")
	w.field("role", "master")
	w.field("connected_slaves", 0)
}

func (s *Server) infoCPU(w *infoWriter) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return
	}
	tv := func(t syscall.Timeval) string { return fmt.Sprintf("%d.%06d", t.Sec, t.Usec) }
	w.section("CPU")
	w.field("used_cpu_sys", tv(ru.Stime))
	w.field("used_cpu_user", tv(ru.Utime))
}

func (s *Server) infoCluster(w *infoWriter) {
	w.section("Cluster")
	w.field("cluster_enabled", 0)
}

// infoKeyspace reports the keys accepted and not yet flushed as db0,
// always, even at 0 (Redis leaves an empty database out).
func (s *Server) infoKeyspace(w *infoWriter) {
	w.section("Keyspace")
	w.field("db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", s.buf.PendingKeys()))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
