package server

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/counterd/counterd/internal/journal"
	"github.com/counterd/counterd/internal/pending"
)

// testJournal is a real journal that counts appends and, when stuck,
// never confirms an fsync, as a dying disk under COUNTERD_FSYNC=always.
type testJournal struct {
	pending.Journal
	appends atomic.Int32
	stuck   bool
}

func (j *testJournal) AppendRecord(rec []byte, n int) (journal.Position, error) {
	j.appends.Add(1)
	return j.Journal.AppendRecord(rec, n)
}

func (j *testJournal) SyncsEachAppend() bool { return j.stuck || j.Journal.SyncsEachAppend() }

func (j *testJournal) WaitDurable(ctx context.Context, pos journal.Position) error {
	if j.stuck {
		<-ctx.Done()
		return ctx.Err()
	}
	return j.Journal.WaitDurable(ctx, pos)
}

// converse sends in on a new connection to s, closes the client's write
// side, and returns everything the server wrote until it closed.
func converse(t *testing.T, s *Server, in string) string {
	t.Helper()
	// No SOCK_CLOEXEC (macOS has none): net.FileConn takes close-on-exec
	// copies and the originals are closed at once.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	srv, cli := conn(fds[0]), conn(fds[1])
	defer cli.Close()
	_ = cli.SetDeadline(time.Now().Add(30 * time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		_ = s.session(context.Background(), srv)
	}()
	wrote := make(chan error, 1)
	go func() {
		_, err := cli.Write([]byte(in))
		if err == nil {
			err = cli.CloseWrite()
		}
		wrote <- err
	}()
	out, err := io.ReadAll(cli)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if err := <-wrote; err != nil && !strings.Contains(in, "QUIT") {
		t.Fatal(err)
	}
	return string(out)
}

// Transactions on the wire: queue-time checks, EXECABORT, all or nothing,
// reads at their position, and the errors of misplaced MULTI, EXEC,
// DISCARD and WATCH. Each input ends with reads of what was applied.
func TestMultiExec(t *testing.T) {
	t.Parallel()
	const (
		ok     = "+OK\r\n"
		queued = "+QUEUED\r\n"
		abort  = "-EXECABORT Transaction discarded because of previous errors.\r\n"
	)
	// aborted is a transaction whose second command is bad: nothing of it
	// is applied, and a is still 0 afterwards.
	aborted := func(bad, badReply string) (string, string) {
		return "MULTI\r\nINCR a\r\n" + bad + "INCR b\r\nEXEC\r\nMGET a b\r\n",
			ok + queued + badReply + queued + abort + "*2\r\n$1\r\n0\r\n$1\r\n0\r\n"
	}
	type tc struct {
		name        string
		in, want    string
		maxPending  int   // pending.Options.MaxPendingKeys
		journalMax  int64 // journal.Options.MaxBytes
		ackCommit   bool
		stuckFsync  bool
		wantAppends int32 // journal records written
		wantPending int   // pending keys at the end
	}
	cases := []tc{
		{
			name: "applied",
			in:   "MULTI\r\nINCR a\r\nINCRBY a 5\r\nDECR b\r\nDECRBY b 2\r\nGET a\r\nEXEC\r\nMGET a b\r\n",
			want: ok + strings.Repeat(queued, 5) + "*5\r\n:1\r\n:5\r\n:-1\r\n:-2\r\n$1\r\n6\r\n" +
				"*2\r\n$1\r\n6\r\n$2\r\n-3\r\n",
			wantAppends: 1, wantPending: 2,
		},
		{
			name: "reads at their position",
			in:   "INCRBY a 10\r\nMULTI\r\nGET a\r\nINCR a\r\nGET a\r\nMGET a b\r\nINCRBY b 7\r\nCOUNT a\r\nCOUNT b\r\nINCR a\r\nEXEC\r\nGET a\r\n",
			want: ":10\r\n" + ok + strings.Repeat(queued, 8) +
				"*8\r\n$2\r\n10\r\n:1\r\n$2\r\n11\r\n*2\r\n$2\r\n11\r\n$1\r\n0\r\n:7\r\n" +
				"*3\r\n:11\r\n$5\r\nexact\r\n:0\r\n*3\r\n:7\r\n$5\r\nexact\r\n:0\r\n:1\r\n" +
				"$2\r\n12\r\n",
			wantAppends: 2, wantPending: 2,
		},
		{
			name:        "reads only, nothing journaled",
			in:          "MULTI\r\nGET a\r\nPING\r\nPING hi\r\nHOT\r\nUNWATCH\r\nEXEC\r\n",
			want:        ok + strings.Repeat(queued, 5) + "*5\r\n$1\r\n0\r\n+PONG\r\n$2\r\nhi\r\n*0\r\n+OK\r\n",
			wantAppends: 0, wantPending: 0,
		},
		{
			name: "empty", in: "MULTI\r\nEXEC\r\n", want: ok + "*0\r\n",
		},
		{
			name: "increments after EXEC are grouped again",
			in:   "MULTI\r\nINCR a\r\nEXEC\r\nINCR a\r\nINCR a\r\nGET a\r\n",
			want: ok + queued + "*1\r\n:1\r\n:1\r\n:1\r\n$1\r\n3\r\n", wantAppends: 2, wantPending: 1,
		},
		{
			name: "discard",
			in:   "MULTI\r\nINCR a\r\nDISCARD\r\nGET a\r\n",
			want: ok + queued + ok + "$1\r\n0\r\n",
		},
		{
			name: "misplaced",
			in:   "EXEC\r\nDISCARD\r\nWATCH a\r\nUNWATCH\r\nMULTI x\r\nPING\r\n",
			want: "-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n" +
				"-ERR WATCH is not supported: counterd cannot watch keys, whose counts change without notice; use MULTI/EXEC alone, whose increments apply all or nothing\r\n" +
				ok + "-ERR wrong number of arguments for 'multi' command\r\n+PONG\r\n",
		},
		{
			// As Redis: neither a nested MULTI nor WATCH discards it.
			name: "nested MULTI and WATCH inside",
			in:   "MULTI\r\nMULTI\r\nINCR a\r\nWATCH a\r\nEXEC\r\nGET a\r\n",
			want: ok + "-ERR MULTI calls can not be nested\r\n" + queued + "-ERR WATCH inside MULTI is not allowed\r\n" +
				"*1\r\n:1\r\n$1\r\n1\r\n",
			wantAppends: 1, wantPending: 1,
		},
		{
			name:        "overflow applies nothing",
			in:          "INCRBY k 9223372036854775807\r\nMULTI\r\nINCR other\r\nINCR k\r\nEXEC\r\nMGET k other\r\n",
			want:        ":9223372036854775807\r\n" + ok + queued + queued + "-ERR transaction discarded, nothing applied: command 2 of the transaction: increment or decrement would overflow\r\n" + "*2\r\n$19\r\n9223372036854775807\r\n$1\r\n0\r\n",
			wantAppends: 1, wantPending: 1,
		},
		{
			name:        "too many pending keys applies nothing",
			in:          "INCR x\r\nMULTI\r\nINCR x\r\nINCR y\r\nEXEC\r\nMGET x y\r\n",
			maxPending:  1,
			want:        ":1\r\n" + ok + queued + queued + "-BUSY transaction discarded, nothing applied: command 2 of the transaction: too many pending keys, back off and retry\r\n" + "*2\r\n$1\r\n1\r\n$1\r\n0\r\n",
			wantAppends: 1, wantPending: 1,
		},
		{
			name:        "journal full applies nothing",
			in:          "MULTI\r\nINCR a\r\nINCR b\r\nEXEC\r\nMGET a b\r\n",
			journalMax:  20,
			want:        ok + queued + queued + "-BUSY journal full of unflushed increments (database unreachable?); transaction discarded, nothing applied, back off and retry\r\n" + "*2\r\n$1\r\n0\r\n$1\r\n0\r\n",
			wantAppends: 1,
		},
		{
			name:        "ack=commit waits for the commit",
			in:          "MULTI\r\nINCR a\r\nEXEC\r\n",
			ackCommit:   true,
			want:        ok + queued + "-TIMEOUT transaction journaled but not confirmed committed within 1ms: wait for commit: context deadline exceeded; it is applied and will be committed when the database answers, do not retry\r\n",
			wantAppends: 1, wantPending: 1,
		},
		{
			name:        "fsync=always waits for the fsync",
			in:          "MULTI\r\nINCR a\r\nEXEC\r\n",
			stuckFsync:  true,
			want:        ok + queued + "-TIMEOUT transaction journaled but not confirmed durable within 1ms; it is applied and will be counted, do not retry\r\n",
			wantAppends: 1, wantPending: 1,
		},
		{
			name: "QUIT inside applies nothing",
			in:   "MULTI\r\nINCR a\r\nQUIT\r\nINCR b\r\n",
			want: ok + queued + ok,
		},
		{
			name: "closing inside applies nothing",
			in:   "MULTI\r\nINCR a\r\n",
			want: ok + queued,
		},
		{
			name: "protocol error inside applies nothing",
			in:   "MULTI\r\nINCR a\r\n*1\r\n$x\r\n",
			want: ok + queued + "-ERR Protocol error: invalid bulk length\r\n",
		},
		{
			name: "too long",
			in:   "MULTI\r\n" + strings.Repeat("INCR a\r\n", maxTxKeys+1) + "EXEC\r\nGET a\r\n",
			want: ok + strings.Repeat(queued, maxTxKeys) + "-ERR transaction too long: more than 100000 keys queued\r\n" +
				abort + "$1\r\n0\r\n",
		},
	}
	for _, bad := range []struct{ name, cmd, reply string }{
		{"unknown command", "FROB x\r\n", "-ERR unknown command 'FROB', with args beginning with: 'x'\r\n"},
		{"wrong arity", "INCR\r\n", "-ERR wrong number of arguments for 'incr' command\r\n"},
		{"wrong arity MGET", "MGET\r\n", "-ERR wrong number of arguments for 'mget' command\r\n"},
		{"bad key", "*2\r\n$4\r\nINCR\r\n$4\r\na\x01bc\r\n", "-ERR invalid key: contains whitespace or a control character\r\n"},
		{"bad key in GET", "*2\r\n$3\r\nGET\r\n$0\r\n\r\n", "-ERR invalid key: empty\r\n"},
		{"bad key in MGET", "*3\r\n$4\r\nMGET\r\n$1\r\nx\r\n$2\r\n\xff\xfe\r\n", "-ERR invalid key: not valid UTF-8\r\n"},
		{"not an integer", "INCRBY a 1.5\r\n", "-ERR value is not an integer or out of range\r\n"},
		{"out of range", "INCRBY a 99999999999999999999\r\n", "-ERR value is not an integer or out of range\r\n"},
		{"DECRBY of MinInt64", "DECRBY a -9223372036854775808\r\n", "-ERR decrement would overflow\r\n"},
		{"FLUSH", "FLUSH\r\n", "-ERR FLUSH is not allowed inside MULTI: it waits on the database; send it after EXEC\r\n"},
		{"connection command", "SELECT 0\r\n", "-ERR Command not allowed inside a transaction\r\n"},
		{"EXEC with arguments", "EXEC x\r\n", "-ERR wrong number of arguments for 'exec' command\r\n"},
	} {
		in, want := aborted(bad.cmd, bad.reply)
		cases = append(cases, tc{name: "abort on " + bad.name, in: in, want: want})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jr, _, err := journal.Open(journal.Options{Dir: t.TempDir(), Fsync: journal.FsyncNo, MaxBytes: tc.journalMax})
			if err != nil {
				t.Fatal(err)
			}
			defer jr.Close()
			tj := &testJournal{Journal: jr, stuck: tc.stuckFsync}
			buf := pending.New(emptyStore{}, pending.Options{Journal: tj, MaxPendingKeys: tc.maxPending})
			timeout := time.Minute
			if tc.ackCommit || tc.stuckFsync {
				timeout = time.Millisecond // nothing ever confirms: only the reply matters
			}
			s := New(buf, Options{AckCommit: tc.ackCommit, Timeout: timeout})
			if got := converse(t, s, tc.in); got != tc.want {
				t.Errorf("replies:\n got %q\nwant %q", clipTail(got), clipTail(tc.want))
			}
			if got := tj.appends.Load(); got != tc.wantAppends {
				t.Errorf("journal records: got %d; want %d", got, tc.wantAppends)
			}
			if got := buf.PendingKeys(); got != tc.wantPending {
				t.Errorf("pending keys: got %d; want %d", got, tc.wantPending)
			}
		})
	}
}

// clipTail keeps failure messages readable for the long transaction.
func clipTail(s string) string {
	if len(s) > 400 {
		return s[:100] + " ... " + s[len(s)-300:]
	}
	return s
}
