package chaos

import (
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// lockTable is a replica's lock table as listed in pages: a node.Node or
// an fsm.FSM.
type lockTable interface {
	Locks(prefix, after string, limit int) (page []lockinfo.LockInfo, more bool)
	Waiters(name, cursor string, limit int) (page []lockinfo.Waiter, next string, err error)
	SharedGrants(name, cursor string, limit int) (page []lockinfo.Holder, next string, err error)
}

// wholeTable reads every lock of t with all its shared grants and waiters
// (a listing carries only the first few of each). Read while the table
// changes, pages may miss or repeat an entry (see fsm.FSM.Locks); the
// harness reads it to pick targets and, settled, at the end and from a
// backup. The error names every page that could not be read; what was read
// is returned with it.
func wholeTable(t lockTable) ([]lockinfo.LockInfo, error) {
	var out []lockinfo.LockInfo
	var errs []error
	for after, more := "", true; more; {
		var page []lockinfo.LockInfo
		page, more = t.Locks("", after, 0)
		for _, l := range page {
			after = l.Name
			var err error
			if l.Shared, err = allPages(func(c string) ([]lockinfo.Holder, string, error) { return t.SharedGrants(l.Name, c, 0) }); err != nil {
				errs = append(errs, fmt.Errorf("shared grants of %s: %w", l.Name, err))
			}
			if l.Waiters, err = allPages(func(c string) ([]lockinfo.Waiter, string, error) { return t.Waiters(l.Name, c, 0) }); err != nil {
				errs = append(errs, fmt.Errorf("waiters of %s: %w", l.Name, err))
			}
			out = append(out, l)
		}
	}
	return out, errors.Join(errs...)
}

// allPages reads pages from the first (cursor "") until one says it is
// the last (next "") or fails.
func allPages[T any](read func(cursor string) (page []T, next string, err error)) ([]T, error) {
	var out []T
	for cursor := ""; ; {
		page, next, err := read(cursor)
		out = append(out, page...)
		if err != nil || next == "" {
			return out, err
		}
		cursor = next
	}
}
