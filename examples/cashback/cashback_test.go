package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/counterd/counterd/internal/pgtest"
	"github.com/counterd/counterd/internal/proctest"
)

// counterd is the daemon, built once.
var counterd string

func TestMain(m *testing.M) {
	if os.Getenv("CASHBACK_AS_MAIN") == "1" {
		// The test runs this binary as the cashback command, so that a
		// crash is a real process dying.
		main()
		os.Exit(0)
	}
	proctest.Main(m, "counterd", "../../cmd/counterd", &counterd)
}

// startCounterd runs counterd against db and returns its socket.
func startCounterd(t *testing.T, db *pgtest.DB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "c.sock")
	cmd := exec.Command(counterd)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + db.URL, "COUNTERD_SOCKET=" + socket,
		"COUNTERD_JOURNAL_DIR=" + filepath.Join(dir, "journal"), "COUNTERD_METRICS_ADDR=off"}
	cmd.SysProcAttr = diesWithTest(syscall.SysProcAttr{})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "counterd ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("counterd not ready after 30s")
	}
	return socket
}

func balances(t *testing.T, db *pgtest.DB) (sum, merchant int64) {
	t.Helper()
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT sum(balance)::bigint, sum(balance) FILTER (WHERE id = 'shop')::bigint FROM cashback_accounts`).Scan(&sum, &merchant); err != nil {
		t.Fatal(err)
	}
	return sum, merchant
}

// Payers crash between TAKE and the transfer, while others pay until the
// budget is spent: the budget is never overspent, the crashes only
// under-spend it, and the sum of balances never changes.
func TestCrashBetweenTakeAndTransferUnderSpends(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t, pgtest.Options{})
	socket := startCounterd(t, db)
	env := func(k string) string {
		return map[string]string{"DATABASE_URL": db.URL, "COUNTERD_SOCKET": socket}[k]
	}
	ctx := context.Background()
	const balance, budget, amount, crashAmount = 100_000, 10_000, 7, 50
	if err := run(ctx, []string{"setup", "shop", fmt.Sprint(balance), fmt.Sprint(budget)}, env, os.Stdout); err != nil {
		t.Fatal(err)
	}

	// Two payers die between TAKE and the transfer.
	const crashes = 2
	for i := range crashes {
		cmd := exec.Command(os.Args[0], "pay", "shop", fmt.Sprintf("crashed-%d", i), fmt.Sprint(crashAmount))
		cmd.Env = append(os.Environ(), "CASHBACK_AS_MAIN=1", "CASHBACK_CRASH_AFTER_TAKE=1",
			"DATABASE_URL="+db.URL, "COUNTERD_SOCKET="+socket)
		out, err := cmd.CombinedOutput()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("payer did not crash after TAKE: %v\n%s", err, out)
		}
		if sum, _ := balances(t, db); sum != balance {
			t.Fatalf("after a crash, balances sum to %d; want %d", sum, balance)
		}
	}

	// Sixteen payers pay until the budget says no.
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: socket, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ReadTimeout: 30 * time.Second})
	defer rdb.Close()
	s := &Service{DB: db.Pool, Counterd: rdb}
	var (
		mu   sync.Mutex
		paid int64
		wg   sync.WaitGroup
	)
	for i := range 16 {
		wg.Go(func() {
			for {
				ok, err := s.Pay(ctx, "shop", fmt.Sprintf("user-%d", i), amount)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				paid += amount
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	sum, merchant := balances(t, db)
	if sum != balance {
		t.Errorf("balances sum to %d; want %d", sum, balance)
	}
	if balance-merchant != paid {
		t.Errorf("merchant paid out %d; the payers counted %d", balance-merchant, paid)
	}
	if paid > budget {
		t.Errorf("paid %d from a budget of %d", paid, budget)
	}
	if err := rdb.Do(ctx, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	var granted int64
	if err := db.Pool.QueryRow(ctx, `SELECT granted FROM budget_totals WHERE key = 'cashback:shop'`).Scan(&granted); err != nil {
		t.Fatal(err)
	}
	if want := paid + crashes*crashAmount; granted != want {
		t.Errorf("granted %d; want %d paid + %d granted to crashed payers", granted, paid, crashes*crashAmount)
	}
	t.Logf("paid %d of a budget of %d; %d under-spent by crashes, %d left over as units smaller than a payment", paid, budget, crashes*crashAmount, budget-granted)
	if budget-granted >= amount {
		t.Errorf("%d units of the budget left unsold; want fewer than one payment of %d", budget-granted, amount)
	}
}

// A newcomer's mistakes get errors that say what to do: a setting not
// set, a merchant set up twice, a payment from a merchant never set up.
// Before, the socket defaulted to TCP localhost:6379, a second setup gave
// a raw duplicate-key error, and a payment from an unknown merchant said
// "budget exhausted" (and a budget of that name would have paid a user
// from an account that did not exist).
func TestMistakesAreExplained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := run(ctx, []string{"pay", "shop", "u", "1"}, func(string) string { return "" }, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "DATABASE_URL is not set") {
		t.Errorf("no settings: %v; want DATABASE_URL named", err)
	}
	db := pgtest.New(t, pgtest.Options{})
	socket := startCounterd(t, db)
	env := func(k string) string {
		return map[string]string{"DATABASE_URL": db.URL, "COUNTERD_SOCKET": socket}[k]
	}
	if err := run(ctx, []string{"setup", "shop", "100", "10"}, env, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"setup", "shop", "100", "10"}, env, io.Discard); !errors.Is(err, ErrExists) {
		t.Errorf("second setup: %v; want ErrExists", err)
	}
	// A budget without an account must not pay anyone.
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: socket, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	if err := rdb.Do(ctx, "BUDGET", budgetKey("ghost"), 100).Err(); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"pay", "ghost", "u", "5"}, env, io.Discard); !errors.Is(err, ErrNoMerchant) {
		t.Errorf("pay from a merchant never set up: %v; want ErrNoMerchant", err)
	}
	var users int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM cashback_accounts WHERE id = 'u'`).Scan(&users); err != nil || users != 0 {
		t.Errorf("accounts named u: %d, %v; want none (nothing paid)", users, err)
	}
}
