package grantwire

import (
	"errors"
	"reflect"
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func TestGrantsRoundTrip(t *testing.T) {
	grants := []fsm.Event{
		{Kind: fsmwire.EventGranted, FromQueue: true, Index: 7, At: -3, Session: 2, Lock: "a", Owner: lockinfo.OwnerID{1}, Token: 9},
		{Kind: fsmwire.EventGranted, FromQueue: true, Index: 1 << 40, At: 1 << 50, Session: 1 << 30, Lock: "é/ü", Owner: lockinfo.OwnerID{15: 2}, Token: 1 << 60},
	}
	got, err := DecodeGrants(AppendGrants(nil, grants))
	if err != nil || !reflect.DeepEqual(got, grants) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	for name, b := range map[string][]byte{
		"truncated":       AppendGrants(nil, grants)[:10],
		"trailing":        append(AppendGrants(nil, grants), 0),
		"too many":        {0xff, 0xff, 0x03},
		"zero token":      AppendGrants(nil, []fsm.Event{{Index: 1, Session: 1, Lock: "a", Owner: lockinfo.OwnerID{1}}}),
		"bad lock name":   AppendGrants(nil, []fsm.Event{{Index: 1, Session: 1, Lock: "", Owner: lockinfo.OwnerID{1}, Token: 1}}),
		"zero owner":      AppendGrants(nil, []fsm.Event{{Index: 1, Session: 1, Lock: "a", Token: 1}}),
		"empty input":     {},
		"count over data": {5},
	} {
		if _, err := DecodeGrants(b); !errors.Is(err, fsmwire.ErrInvalidEntry) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeGrants(f *testing.F) {
	f.Add(AppendGrants(nil, []fsm.Event{{Index: 7, At: 3, Session: 2, Lock: "a", Owner: lockinfo.OwnerID{1}, Token: 9}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		grants, err := DecodeGrants(b)
		if err != nil {
			return
		}
		again, err := DecodeGrants(AppendGrants(nil, grants))
		if err != nil || !reflect.DeepEqual(again, grants) {
			t.Fatalf("re-encoding changed the grants: %v", err)
		}
	})
}
