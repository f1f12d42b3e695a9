package chaos

import (
	"fmt"
	"testing"
	"time"
)

// pinnedSeeds are in-process runs that once failed, replayed in every go
// test with the duration that still reproduced the failure on the code
// before its fix (a replay reproduces the fault schedule, not every
// interleaving: see README "Replay and bounds").
var pinnedSeeds = []struct {
	class    string
	seed     int64
	duration time.Duration
	finding  string
}{
	{"membership", 6016, 10 * time.Second,
		"an episode took the spare n7 and gave up (unreachable-joiner with the founders decommissioned); the heal started n7 with the founders as its seeds, all gone: n7 alone, no grant through it"},
}

// TestPinnedSeeds replays the pinned seeds; each must pass every check.
func TestPinnedSeeds(t *testing.T) {
	useShm(t)
	for _, p := range pinnedSeeds {
		t.Run(fmt.Sprintf("class=%s/seed=%d", p.class, p.seed), func(t *testing.T) {
			if ok, _ := runChecked(t, baseConfig(p.class, p.seed, p.duration), nil); !ok {
				t.Logf("pinned because: %s", p.finding)
			}
		})
	}
}
