package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSingleton runs the example with two crashes of the runner: the job
// must run three times, on a different replica each time, never two at once,
// with strictly increasing tokens — and each crashed run must have stopped
// on the loss of its lease.
func TestSingleton(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-handovers", "2"}, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	runs := regexp.MustCompile(`(?m)^  (r\d)  token (\d+)\s+(\d+) fenced writes  (.*)$`).FindAllStringSubmatch(out.String(), -1)
	if len(runs) != 3 {
		t.Fatalf("%d runs listed, want 3", len(runs))
	}
	var last uint64
	for i, r := range runs {
		tok, _ := strconv.ParseUint(r[2], 10, 64)
		if tok <= last {
			t.Errorf("run %d: token %d after %d", i, tok, last)
		}
		last = tok
		if i > 0 && r[1] == runs[i-1][1] {
			t.Errorf("run %d on %s again after its crash", i, r[1])
		}
		if i < 2 && !strings.Contains(r[4], "lease lost") {
			t.Errorf("crashed run %d stopped for another reason: %s", i, r[4])
		}
	}
	if !strings.Contains(out.String(), "overlapping runs: 0;") {
		t.Error("overlapping runs")
	}
}
