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
// The package has no dependency on the rest of raftlock, nor on any
// database client: a service that only owns the protected data can import it
// alone, with the driver it already uses.
//
// # The fences
//
// Each fence performs the check and the protected write as one atomic step
// of the store that holds the data, so a holder that pauses between its
// check and its write is still refused:
//
//   - Memory: state held in one process; a mutex per resource.
//   - SQL: a table with one row per resource, checked and updated in the
//     transaction of the protected write (database/sql; SQLite, PostgreSQL,
//     MySQL and MariaDB, the Dialect chosen explicitly). Any isolation level
//     is correct; see SQL for why, and for the retry of serialization
//     failures.
//   - Redis: one Lua script compares the stored token and runs the
//     protected commands only if the caller's token is not older.
//   - Object: object stores with conditional writes (S3 If-Match, GCS
//     generation preconditions, Azure Blob If-Match): the token is stored
//     with the object and every write is conditional on the version read.
//
// # Tokens and resource names
//
// Tokens start at 1: 0 is refused with ErrInvalid. Memory, Redis and
// Object admit every token up to MaxToken; SQL stores tokens in a signed
// 64-bit column and refuses tokens above MaxSQLToken with ErrInvalid
// (raftlock's tokens stay far below: even tokens stamped in microseconds
// reach 2^63 only in 292,000 years).
//
// A resource name is 1 to MaxResourceLen bytes of valid UTF-8 without NUL
// bytes (a raftlock lock name always is); anything else is refused with
// ErrInvalid. Names are compared byte for byte in every store: "Invoice",
// "invoice" and "invoice " are three resources (the SQL tables use binary
// collations for that).
//
// # Growth and cleanup
//
// Every fence keeps one entry per resource it ever admitted (a map entry, a
// table row, a Redis key), forever unless told otherwise: the entry is what
// refuses a stale holder, and a fence that forgot it would admit that
// holder's write as a first one. Object keeps its token inside the object,
// so it needs no cleanup of its own.
//
// Drop entries only for resources that are gone, with Forget and the token
// of a current holder: take the resource's lock, delete the data with a
// fenced write, then Forget with the same token (a newer holder in between
// makes Forget fail with ErrStaleToken and keeps the entry). After that a
// stale holder's write is admitted as a first write again, so writers must
// not recreate a deleted resource blindly (update existing records; treat
// "not found" as the end). A periodic job can expire a whole batch the
// same way, one resource at a time (Memory.Forget, SQL.Forget,
// Redis.Forget; Memory.Len tells how many entries are kept).
//
// # Lifetime
//
// A persistent fence outlives the lock cluster that issued its tokens.
// From cluster version 3 every new leader raises the grant counter to at
// least its wall-clock time in microseconds (fsm.RaiseTokens; the stamp is
// in the log, so every replica agrees). A cluster rebuilt from empty data
// directories, restored from an older backup or recovered from a lost
// quorum therefore grants tokens above every token the old cluster issued,
// and the fence keeps accepting writes, without operator action — as long
// as the old cluster granted on average fewer than one token per
// microsecond (a million a second) since its own last raise, and the new
// leader's clock is not behind the moment the old cluster's last token was
// granted. The first grants of a rebuilt cluster, made before its first
// leader's raise is committed (while the cluster version rises to 3), can
// still carry low tokens: the fence refuses them (safe: refused, never
// admitted). Outside that bound (a cluster of an older release, a clock set
// back), drop the fence's entries — only when no holder of the old cluster
// can still write (for SQL: delete the table's rows) — before the new
// cluster's holders write.
//
// # Readers and semaphores
//
// Every grant of a name — a read-write lock's readers and writers, a
// semaphore's holders — takes the next token. A writer's token is above
// every earlier grant's, so fence writes with it as with a mutex. A
// reader's token is above the token of every writer granted before it:
// a read is consistent if the highest token the fence admitted is below
// the reader's (Memory.Highest, or a SQL read of the fence row); never
// record a reader's token with Do/Exec (concurrent readers would refuse
// each other). A semaphore's grants are concurrent by design: their tokens
// tell the grants apart, but one resource's fence would let only the
// newest holder write.
package fence

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// ErrStaleToken: a write with a higher fencing token was already admitted for
// this resource; the caller's lease is stale and its write was refused.
var ErrStaleToken = errors.New("fence: stale fencing token")

// ErrInvalid: an invalid argument or configuration (a resource name that is
// empty, too long, not UTF-8 or holds NUL; a zero token or one beyond the
// store's range; a bad table name or a missing client).
var ErrInvalid = errors.New("fence: invalid argument")

// Limits of tokens and resource names, the same for every fence.
const (
	MaxToken       = math.MaxUint64 // highest token of Memory, Redis, Object
	MaxSQLToken    = math.MaxInt64  // highest token of SQL (a signed BIGINT)
	MaxResourceLen = 1024           // bytes
)

func check(resource string, token, maxToken uint64) error {
	switch {
	case resource == "":
		return fmt.Errorf("%w: empty resource", ErrInvalid)
	case len(resource) > MaxResourceLen:
		return fmt.Errorf("%w: resource of %d bytes (max %d)", ErrInvalid, len(resource), MaxResourceLen)
	case !utf8.ValidString(resource):
		return fmt.Errorf("%w: resource %q is not valid UTF-8", ErrInvalid, resource)
	case strings.IndexByte(resource, 0) >= 0:
		return fmt.Errorf("%w: resource %q holds a NUL byte", ErrInvalid, resource)
	case token == 0:
		return fmt.Errorf("%w: zero token (tokens start at 1)", ErrInvalid)
	case token > maxToken:
		return fmt.Errorf("%w: token %d beyond this fence's range (max %d)", ErrInvalid, token, maxToken)
	}
	return nil
}
