package fence

import (
	"context"
	"errors"
	"fmt"
)

// ObjectStore is what fencing needs of an object store: the token and
// version of an object, and a write conditional on that version. Adapters
// are a few lines over a store's SDK (fence/fencetest has one over
// the Azure Blob REST API, tested against Azurite):
//
//   - Amazon S3 (conditional writes since 2024), and S3-compatible stores
//     that implement them: Get is GetObject (version: the ETag; token: the
//     object's x-amz-meta-fencing-token), Put is PutObject with IfMatch
//     (the ETag) or IfNoneMatch "*" (no object yet); 412 Precondition Failed
//     (and 409 ConditionalRequestConflict) map to ErrPrecondition.
//   - Google Cloud Storage: version is the generation; Put with
//     ifGenerationMatch (0: no object yet).
//   - Azure Blob Storage: version is the ETag; Put Blob with If-Match, or
//     If-None-Match "*".
//
// The version must change with every write, even of the same body. GCS
// generations and Azure ETags do; an S3 ETag is the MD5 of the content, so
// two writes of equal bodies share it, and a stale holder's write could
// then pass If-Match and lower the stored token. An S3 adapter must make
// each body unique (store the token in the body too, e.g. as a prefix).
//
// A store without a conditional write (older S3-compatible servers, plain
// file shares) cannot fence: between its read and its write another holder
// can write. Keep the fence in a database then (SQL or Redis), upload every
// version under a new key (key + token) that nobody reads yet, and publish
// it by a fenced write of the pointer "current version of key" in that
// database: a stale holder's upload is never published.
type ObjectStore interface {
	// Get returns the object at key with its stored token (0 if it has
	// none) and version; exists is false if there is no object.
	Get(ctx context.Context, key string) (obj StoredObject, exists bool, err error)
	// Put writes body with token stored alongside, only if the object's
	// version is still ifVersion — or, if ifVersion is "", only if there is
	// no object. A failed condition returns an error wrapping
	// ErrPrecondition.
	Put(ctx context.Context, key string, body []byte, token uint64, ifVersion string) error
}

// StoredObject is an object as ObjectStore.Get returns it.
type StoredObject struct {
	Body    []byte
	Token   uint64 // the fencing token stored with it; 0 if none
	Version string // changes with every write (ETag, generation)
}

// ErrPrecondition: a conditional object write failed because the object
// changed (or appeared) since it was read.
var ErrPrecondition = errors.New("fence: object changed since it was read")

// Object is a fence for an object store with conditional writes: the token
// is stored with the object itself, and every write is conditional on the
// version it read, so a write whose check is stale fails at the store. Put
// reads the object's token and version, refuses a token below the stored
// one, and writes conditionally; if another writer got in between, it reads
// again (up to Attempts times) — and is refused then if that writer's token
// was higher. Update does the same for a read-modify-write.
//
// The token lives and dies with the object: no table grows, but deleting
// the object forgets its token, and a stale holder's Put then creates it
// anew. Where that matters, delete by a fenced Put of a tombstone (an empty
// body the readers treat as "deleted").
// Object is safe for concurrent use once configured.
type Object struct {
	Store ObjectStore // required
	// Attempts is how many times Put reads and writes when the object
	// changed in between; 0 means 10.
	Attempts int
	// OnReject, if set, is called for every refused stale write.
	OnReject func(key string, token, highest uint64)
}

// Put writes body to key if token is at least the token stored with the
// object, else returns an error wrapping ErrStaleToken: Update with a
// modify that returns body.
func (f *Object) Put(ctx context.Context, key string, token uint64, body []byte) error {
	return f.Update(ctx, key, token, func([]byte, bool) ([]byte, error) { return body, nil })
}

// Update reads the object at key, refuses a token below the stored one with
// an error wrapping ErrStaleToken, calls modify with the current body
// (exists false: no object yet) and writes its result conditionally on the
// version read. If the object changed in between, it starts again (modify
// sees the new body), up to Attempts times, then returns an error wrapping
// ErrConflict. An error from modify is returned as is, and nothing is
// written. The key must be a valid resource name (1 to MaxResourceLen
// bytes: S3's limit too).
func (f *Object) Update(ctx context.Context, key string, token uint64, modify func(body []byte, exists bool) ([]byte, error)) error {
	if err := check(key, token, MaxToken); err != nil {
		return err
	}
	if f.Store == nil {
		return fmt.Errorf("%w: Object.Store is nil", ErrInvalid)
	}
	attempts := f.Attempts
	if attempts <= 0 {
		attempts = 10
	}
	for n := 1; ; n++ {
		cur, exists, err := f.Store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("fence: get %q: %w", key, err)
		}
		if exists && token < cur.Token {
			if f.OnReject != nil {
				f.OnReject(key, token, cur.Token)
			}
			return staleError(key, token, cur.Token)
		}
		if !exists {
			cur = StoredObject{}
		}
		body, err := modify(cur.Body, exists)
		if err != nil {
			return err
		}
		err = f.Store.Put(ctx, key, body, token, cur.Version)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, ErrPrecondition):
			return fmt.Errorf("fence: put %q: %w", key, err)
		case n >= attempts:
			return fmt.Errorf("%w: %q changed under %d attempts: %w", ErrConflict, key, n, err)
		case ctx.Err() != nil:
			return fmt.Errorf("fence: put %q: %w", key, ctx.Err())
		}
	}
}

// Highest returns the token stored with the object at key (0 if there is
// no object or it has no token).
func (f *Object) Highest(ctx context.Context, key string) (uint64, error) {
	if err := check(key, 1, MaxToken); err != nil {
		return 0, err
	}
	if f.Store == nil {
		return 0, fmt.Errorf("%w: Object.Store is nil", ErrInvalid)
	}
	cur, exists, err := f.Store.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("fence: get %q: %w", key, err)
	}
	if !exists {
		return 0, nil
	}
	return cur.Token, nil
}
