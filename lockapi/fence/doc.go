// Package fence is the resource-side half of fenced locking: it admits a
// write carrying a fencing token only if no write with a higher token has
// been admitted for the same resource before, and rejects the rest with
// ErrStaleToken.
//
// A lock is a lease: its holder can pause (GC, VM migration, a slow disk)
// past its lease and keep writing after another holder was granted the
// lock. Checking "do I still hold the lock?" in the client cannot prevent
// that — the check and the write are not atomic. Fencing can: every grant
// carries a token that strictly increases per lock, and the protected
// resource remembers the highest token it accepted per resource and rejects
// lower ones. A token equal to the highest is the same holder writing again
// and is admitted.
//
// The package has no dependency on the rest of raftlock: a service that only
// owns the protected data can import it alone.
//
// Two forms are provided: Memory, for state held in one process, and SQL,
// which performs the check and the protected write atomically in the caller's
// database transaction.
package fence

import "errors"

// ErrStaleToken: a write with a higher fencing token was already admitted for
// this resource; the caller's lease is stale and its write was refused.
var ErrStaleToken = errors.New("fence: stale fencing token")

// ErrInvalid: an invalid resource name or token (empty resource, zero token,
// token beyond the int64 range for SQL).
var ErrInvalid = errors.New("fence: invalid argument")
