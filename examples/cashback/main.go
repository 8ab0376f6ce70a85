// Command cashback is an example app on counterd's budgets: a cashback
// service pays users back from a merchant's account until the merchant's
// cashback budget is spent. README.md says how to run it.
//
// The budget and the balances are two constraints, kept apart: the budget
// ("never pay out more than B") is a counterd budget, and TAKE grants a
// payment from it at sidecar speed without touching the accounts; the
// balances ("money is only moved, never made") are the app's own
// transaction, which moves the money from the merchant to the user. A
// crash between the two leaves units granted and never paid: the campaign
// under-spends, and no balance is ever wrong.
//
// Usage:
//
//	cashback setup MERCHANT BALANCE BUDGET   create the merchant's account and budget
//	cashback pay MERCHANT USER AMOUNT        pay AMOUNT back to USER, if the budget allows
//
// DATABASE_URL names the app's database and COUNTERD_SOCKET counterd's
// socket.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cashback:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) != 4 || (args[0] != "setup" && args[0] != "pay") {
		return errors.New("usage: cashback setup MERCHANT BALANCE BUDGET | cashback pay MERCHANT USER AMOUNT")
	}
	for _, v := range []string{"DATABASE_URL", "COUNTERD_SOCKET"} {
		if getenv(v) == "" {
			return fmt.Errorf("%s is not set: the app's database URL and counterd's socket (make run prints both)", v)
		}
	}
	pool, err := pgxpool.New(ctx, getenv("DATABASE_URL"))
	if err != nil {
		return errors.New("DATABASE_URL is not a valid PostgreSQL URL")
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: getenv("COUNTERD_SOCKET"), Protocol: 2,
		// A TAKE resent after a lost reply could be granted twice, and a
		// reply given up on is a grant under-spent: never retry, and wait
		// long for a busy machine.
		DisableIdentity: true, MaxRetries: -1, ReadTimeout: 30 * time.Second})
	defer rdb.Close()
	s := &Service{DB: pool, Counterd: rdb}
	if getenv("CASHBACK_CRASH_AFTER_TAKE") == "1" {
		// For the test: die as a crash would, between the two steps.
		s.afterTake = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	}
	if args[0] == "setup" {
		balance, err1 := strconv.ParseInt(args[2], 10, 64)
		budget, err2 := strconv.ParseInt(args[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		return s.Setup(ctx, args[1], balance, budget)
	}
	amount, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return err
	}
	paid, err := s.Pay(ctx, args[1], args[2], amount)
	if err != nil {
		return err
	}
	if !paid {
		fmt.Fprintln(stdout, "budget exhausted: nothing paid")
		return nil
	}
	fmt.Fprintf(stdout, "paid %d from %s to %s\n", amount, args[1], args[2])
	return nil
}

// Service pays cashback.
type Service struct {
	DB       *pgxpool.Pool
	Counterd *redis.Client

	afterTake func() // test hook: runs between TAKE and the transfer
}

// ErrExists and ErrNoMerchant are Setup's and Pay's errors for a merchant
// already set up and one never set up.
var (
	ErrExists     = errors.New("an account of that name already exists")
	ErrNoMerchant = errors.New("no such merchant (run cashback setup first)")
)

// budgetKey is the counterd budget of a merchant's campaign.
func budgetKey(merchant string) string { return "cashback:" + merchant }

// Setup creates the accounts table, the merchant's account with balance
// and its cashback budget.
func (s *Service) Setup(ctx context.Context, merchant string, balance, budget int64) error {
	if _, err := s.DB.Exec(ctx, `CREATE TABLE IF NOT EXISTS cashback_accounts (
    id text PRIMARY KEY,
    balance bigint NOT NULL
)`); err != nil {
		return fmt.Errorf("create accounts: %w", err)
	}
	tag, err := s.DB.Exec(ctx, `INSERT INTO cashback_accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, merchant, balance)
	if err != nil {
		return fmt.Errorf("create the merchant's account: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", ErrExists, merchant)
	}
	if err := s.Counterd.Do(ctx, "BUDGET", budgetKey(merchant), budget).Err(); err != nil {
		return fmt.Errorf("create the cashback budget: %w", err)
	}
	return nil
}

// take is TAKE key n, sent again (at most three times) only when counterd
// says the units were not granted: a refusal it is sure of, such as the
// budget's row staying locked past the command's deadline. Any other
// error may hide a grant, so it is not retried (that would grant twice).
func (s *Service) take(ctx context.Context, key string, n int64) (int64, error) {
	for attempt := 1; ; attempt++ {
		got, err := s.Counterd.Do(ctx, "TAKE", key, n).Int64()
		if err == nil || attempt == 3 || !strings.HasSuffix(err.Error(), "; not granted") {
			return got, err
		}
	}
}

// Pay pays amount back to user from merchant's account if the merchant's
// budget grants it, and reports whether it paid. TAKE first: the budget
// is never overspent, even by concurrent payers on many hosts. Then the
// transfer, in one transaction of the app's own database, so the sum of
// balances never changes. If the process dies between the two, the grant
// is never paid: under-spend, the safe side for a budget.
func (s *Service) Pay(ctx context.Context, merchant, user string, amount int64) (bool, error) {
	// A merchant never set up has no budget either, and TAKE would answer
	// 0 as for a spent one: say which.
	var known bool
	if err := s.DB.QueryRow(ctx, `SELECT EXISTS (SELECT FROM cashback_accounts WHERE id = $1)`, merchant).Scan(&known); err != nil {
		return false, fmt.Errorf("find the merchant: %w", err)
	}
	if !known {
		return false, fmt.Errorf("%w: %s", ErrNoMerchant, merchant)
	}
	n, err := s.take(ctx, budgetKey(merchant), amount)
	if err != nil {
		return false, fmt.Errorf("take from the cashback budget: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	if s.afterTake != nil {
		s.afterTake()
	}
	err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE cashback_accounts SET balance = balance - $2 WHERE id = $1`, merchant, amount)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			// Money is only moved, never made.
			return fmt.Errorf("%w: %s", ErrNoMerchant, merchant)
		}
		_, err = tx.Exec(ctx, `INSERT INTO cashback_accounts AS a (id, balance) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET balance = a.balance + excluded.balance`, user, amount)
		return err
	})
	if err != nil {
		// The units stay granted and unpaid: under-spend, as for a crash.
		return false, fmt.Errorf("transfer (the %d units granted are not paid): %w", amount, err)
	}
	return true, nil
}
