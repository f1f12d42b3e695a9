package chaos

import (
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
)

// lockTable is a replica's lock table as listed in pages: a node.Node or
// an fsm.FSM.
type lockTable interface {
	Locks(prefix, after string, limit int) (page []fsm.LockInfo, more bool)
	Waiters(name, cursor string, limit int) (page []fsm.Waiter, next string, err error)
	SharedGrants(name, cursor string, limit int) (page []fsm.Holder, next string, err error)
}

// wholeTable reads every lock of t with all its shared grants and waiters
// (a listing carries only the first few of each). Read while the table
// changes, pages may miss or repeat an entry (see fsm.FSM.Locks); the
// harness reads it to pick targets and, settled, at the end and from a
// backup. The error names every page that could not be read; what was read
// is returned with it.
func wholeTable(t lockTable) ([]fsm.LockInfo, error) {
	var out []fsm.LockInfo
	var errs []error
	for after, more := "", true; more; {
		var page []fsm.LockInfo
		page, more = t.Locks("", after, 0)
		for _, l := range page {
			after = l.Name
			l.Shared, l.Waiters = nil, nil
			for cursor := ""; ; {
				grants, next, err := t.SharedGrants(l.Name, cursor, 0)
				if err != nil {
					errs = append(errs, fmt.Errorf("shared grants of %s: %w", l.Name, err))
					break
				}
				l.Shared = append(l.Shared, grants...)
				if cursor = next; next == "" {
					break
				}
			}
			for cursor := ""; ; {
				waiters, next, err := t.Waiters(l.Name, cursor, 0)
				if err != nil {
					errs = append(errs, fmt.Errorf("waiters of %s: %w", l.Name, err))
					break
				}
				l.Waiters = append(l.Waiters, waiters...)
				if cursor = next; next == "" {
					break
				}
			}
			out = append(out, l)
		}
	}
	return out, errors.Join(errs...)
}
