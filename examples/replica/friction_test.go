package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// The defaults -h prints are the library's (issue 16: -max-voters said 0,
// -reap-timeout 0s, the documented defaults 5 and 30 s).
func TestFlagDefaultsAgreeWithTheLibrary(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, envOf(nil), &out); err != nil {
		t.Fatal(err)
	}
	d := node.DefaultConfig()
	for _, want := range []string{
		"-max-voters (RAFTLOCK_MAX_VOTERS)\n    \tvoters the leader keeps; more members join as non-voters (default " + itoa(d.MaxVoters) + ")",
		"(default " + d.ReapTimeout.String() + ")",
		"-ttl (RAFTLOCK_TTL)\n    \tTTL of the HTTP clients' session (default " + lockapi.DefaultTTL.String() + ")",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Usage errors exit 2 (errUsage) before anything starts: a negative
// -bootstrap-expect, a TTL below the cluster timing's minimum, an HTTP API
// without authentication that was not switched off explicitly.
func TestUsageErrorsBeforeStart(t *testing.T) {
	base := []string{"-id", "r1", "-data-dir", t.TempDir(), "-bind", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-http", "127.0.0.1:0"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"bootstrap-expect -1": {[]string{"-bootstrap-expect", "-1", "-http-no-auth"}, "bootstrap-expect"},
		"ttl 100ms":           {[]string{"-ttl", "100ms", "-http-no-auth"}, "-ttl (RAFTLOCK_TTL) 100ms"},
		"no auth":             {nil, "-admin-token"},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := run(ctx, append(append([]string{}, base...), tc.args...), envOf(nil), &out)
		cancel()
		if err != errUsage || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: %v, output %q; want errUsage naming %q", name, err, out.String(), tc.want)
		}
	}
}
