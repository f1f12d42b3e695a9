package lockapi_test

import (
	"errors"
	"testing"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/lockapi"
)

// A lease's token goes to a fence as it is (issue 16: no uint64(...)
// conversion in user code); the fence still refuses a stale one.
func TestTokenPassesToFenceWithoutConversion(t *testing.T) {
	var older, newer lockapi.Token = 7, 8
	var m fence.Memory
	if err := m.Do("invoice:1", newer, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := m.Do("invoice:1", older, func() error { return nil }); !errors.Is(err, lockapi.ErrStaleToken) {
		t.Fatalf("stale token admitted: %v", err)
	}
}
