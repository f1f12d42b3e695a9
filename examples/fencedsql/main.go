// Command fencedsql shows fenced writes into a real SQL database (SQLite
// or PostgreSQL, through database/sql) with lockapi and fence.SQL:
//
//	go run . [-db invoices.db] [-workers 4] [-rounds 25]      # SQLite
//	go run . -postgres 'postgres://user@localhost:5432/db'    # PostgreSQL
//
// (from examples/fencedsql: a module of its own, so that the PostgreSQL
// driver stays out of raftlock's go.mod.)
//
// Part 1: several workers update one invoice under its lock. Each write runs
// in one transaction with the fence check (fence.SQL.Exec): the invoice row
// and the fence row commit together. The final amount equals the number of
// grants: no update was lost.
//
// Part 2: the reference's stale holder. Worker A holds the invoice's lock
// (token T) and is about to write when its lease ends (here its session is
// closed; in real life it expired while A was paused). Worker B is granted
// the lock (token T' > T) and writes. A then writes with T — and the fence
// refuses it with fence.ErrStaleToken; the row keeps B's write.
//
// The cluster here is a single in-memory replica, to keep the example about
// the database side; a real deployment runs three or five replicas (see
// examples/replica and examples/demo). It is new at every run: its first
// leader floors the token counter at its wall clock in microseconds, so its
// tokens start above an earlier run's — but only within the bound that
// docs/guarantees.md states ("Fencing tokens"), and a first grant may come
// before that floor commits. So on a database that an earlier run
// used, where the fence already holds a token, the program does not rely on
// the floor: it says so and stops, unless -reset-fence tells it to forget
// the fence's entry — safe here only because the earlier run's cluster and
// holders are gone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencedsql:", err)
		os.Exit(1)
	}
}

const invoice = "invoice:842"

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fencedsql", flag.ContinueOnError)
	fs.SetOutput(out)
	dbPath := fs.String("db", "", "SQLite database file (default: a temporary one)")
	pgDSN := fs.String("postgres", "", "PostgreSQL connection string: use PostgreSQL instead of SQLite")
	resetFence := fs.Bool("reset-fence", false, "forget the fence's entry for the invoice left by an earlier run")
	workers := fs.Int("workers", 4, "concurrent workers")
	rounds := fs.Int("rounds", 25, "updates per worker")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *workers < 1 || *rounds < 1:
		return fmt.Errorf("-workers and -rounds must be at least 1")
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *dbPath != "" && *pgDSN != "":
		return fmt.Errorf("-db (SQLite) and -postgres exclude each other")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if *dbPath == "" && *pgDSN == "" {
		dir, err := os.MkdirTemp("", "raftlock-fencedsql-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dbPath = filepath.Join(dir, "invoices.db")
	}
	st, err := openStore(ctx, *pgDSN, *dbPath)
	if err != nil {
		return err
	}
	defer st.db.Close()
	reset, err := st.prepare(ctx, *resetFence)
	if err != nil {
		return err
	}
	if reset > 0 {
		fmt.Fprintf(out, "forgot the fence's token %d for %s, left by an earlier run (-reset-fence)\n", reset, invoice)
	}

	n, err := startNode(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Close(cctx)
	}()

	write := func(ctx context.Context, l *lockapi.Lease, who string) error {
		return st.write(ctx, uint64(l.Token()), who)
	}

	fmt.Fprintf(out, "part 1: %d workers × %d fenced updates of %s\n", *workers, *rounds, invoice)
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("worker-%d", w+1)
			sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner(who))
			if err != nil {
				errs <- err
				return
			}
			defer sess.Close(context.Background())
			for range *rounds {
				lease, err := sess.Lock(ctx, invoice) // FIFO wait, bounded by ctx
				if err != nil {
					errs <- err
					return
				}
				// Pass the lease's context: if the lease is lost, the
				// transaction is abandoned (the fence would refuse it anyway).
				err = write(lease.Context(), lease, who)
				if uerr := lease.Unlock(ctx); err == nil {
					err = uerr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	amount, by, tok, err := st.invoiceRow(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  amount = %d (want %d), last written by %s with token %d\n", amount, *workers**rounds, by, tok)
	if amount != int64(*workers**rounds) {
		return fmt.Errorf("lost updates: amount %d, want %d", amount, *workers**rounds)
	}

	fmt.Fprintf(out, "part 2: a stale holder\n")
	a, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("worker-A"))
	if err != nil {
		return err
	}
	b, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("worker-B"))
	if err != nil {
		return err
	}
	defer b.Close(context.Background())
	la, err := a.Lock(ctx, invoice)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  A holds %s with token %d and prepares its write…\n", invoice, la.Token())
	// A's lease ends before it writes (in real life: it paused past its TTL
	// and the cluster expired its session; here we close the session).
	if err := a.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "  A's lease ends (%v); the cluster may grant the lock to someone else\n", la.Err())
	lb, err := b.Lock(ctx, invoice)
	if err != nil {
		return err
	}
	if err := write(lb.Context(), lb, "worker-B"); err != nil {
		return err
	}
	fmt.Fprintf(out, "  B is granted %s with token %d and writes: accepted\n", invoice, lb.Token())
	if err := lb.Unlock(ctx); err != nil {
		return err
	}
	// A resumes and writes with its old token (not with its lease's context:
	// like the reference's stale holder, it does not check).
	err = write(context.Background(), la, "worker-A")
	if !errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("A's stale write was not refused: %v", err)
	}
	fmt.Fprintf(out, "  A writes with token %d: refused (%v)\n", la.Token(), err)
	if amount, by, tok, err = st.invoiceRow(ctx); err != nil {
		return err
	}
	highest, err := st.fence.Highest(ctx, invoice)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s: amount %d, last written by %s with token %d; the fence's highest token is %d\n", invoice, amount, by, tok, highest)
	if by != "worker-B" || tok != uint64(lb.Token()) || highest != uint64(lb.Token()) {
		return errors.New("the stale write changed the invoice")
	}
	return nil
}

// startNode starts a single-replica cluster in memory on a loopback port.
func startNode(ctx context.Context) (*node.Node, error) {
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory = "replica-a", true
	// A free port; Bootstrap without Peers: a cluster of this node alone.
	cfg.BindAddr, cfg.Bootstrap = "127.0.0.1:0", true
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := n.WaitReady(ctx); err != nil {
		n.Close(context.Background())
		return nil, err
	}
	return n, nil
}
