package fsm

import "errors"

// Sentinel errors of the state machine itself (those of decoding,
// validation and results, which [Result.Err] maps statuses to, are in
// internal/fsmwire). Test with errors.Is.
var (
	// ErrHalted: the state machine met an entry it cannot apply (an unknown
	// version) and stopped: it applies nothing after it and refuses to
	// snapshot, until a snapshot of a known version is restored. A restart
	// with a binary that knows the version replays the log and continues.
	ErrHalted = errors.New("fsm: halted")
	// ErrOlderSnapshot: Restore was given a valid snapshot taken at an index
	// below the applied index. The state machine never goes back: the state
	// is unchanged (not halted, not ended a halt).
	ErrOlderSnapshot = errors.New("fsm: snapshot older than the applied state")
	// ErrInvalidCursor: a listing's cursor that no page returned (see
	// FSM.Waiters).
	ErrInvalidCursor = errors.New("fsm: invalid cursor")
)
