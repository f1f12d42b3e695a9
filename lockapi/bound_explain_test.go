package lockapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestExplainFailure(t *testing.T) {
	et := 50 * time.Millisecond
	sessErr := fmt.Errorf("%w: lost", ErrSessionExpired)
	bare := context.DeadlineExceeded // what the batcher used to return
	quorum := fmt.Errorf("%w: %w", ErrNoQuorum, context.DeadlineExceeded)
	other := errors.New("node: something else")
	for _, tc := range []struct {
		name                    string
		err, sess               error
		callerDone, ownDeadline bool
		waited                  time.Duration
		want                    []error // errors.Is targets
		notWant                 []error
	}{
		{"session ended first", context.Canceled, sessErr, false, false, time.Millisecond, []error{ErrSessionExpired}, []error{ErrNoQuorum}},
		{"caller done beats session", bare, sessErr, true, false, time.Second, []error{ErrNoQuorum, context.DeadlineExceeded}, []error{ErrSessionExpired}},
		{"no quorum stays", quorum, nil, true, false, time.Millisecond, []error{ErrNoQuorum}, nil},
		{"own try deadline", bare, nil, false, true, time.Millisecond, []error{ErrNoQuorum, context.DeadlineExceeded}, nil},
		{"waited an election timeout", bare, nil, true, false, et, []error{ErrNoQuorum, context.DeadlineExceeded}, nil},
		{"short caller deadline", bare, nil, true, false, et - 1, []error{context.DeadlineExceeded}, []error{ErrNoQuorum}},
		{"cancelled by the caller at once", context.Canceled, nil, true, false, 0, []error{context.Canceled}, []error{ErrNoQuorum}},
		{"other errors as they are", other, nil, false, false, time.Second, []error{other}, []error{ErrNoQuorum}},
	} {
		got := explainFailure(tc.err, tc.sess, tc.callerDone, tc.ownDeadline, tc.waited, et)
		for _, w := range tc.want {
			if !errors.Is(got, w) {
				t.Errorf("%s: %v does not wrap %v", tc.name, got, w)
			}
		}
		for _, w := range tc.notWant {
			if errors.Is(got, w) {
				t.Errorf("%s: %v wraps %v", tc.name, got, w)
			}
		}
	}
}
