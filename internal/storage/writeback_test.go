package storage

import "testing"

func TestNextWriteback(t *testing.T) {
	const step = 4
	for _, tc := range []struct {
		name            string
		written, synced int64
		off, size       int64
		ok              bool
	}{
		{"nothing written", 0, 0, 0, 0, false},
		{"less than a step", 3, 0, 0, 0, false},
		{"one step", 4, 0, 0, 4, true},
		{"a step and some", 6, 0, 0, 4, true},
		{"after one step, less than another", 7, 4, 0, 0, false},
		{"the second step", 9, 4, 4, 4, true},
		{"several steps in one write", 13, 0, 0, 12, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, size, ok := nextWriteback(tc.written, tc.synced, step)
			if off != tc.off || size != tc.size || ok != tc.ok {
				t.Fatalf("nextWriteback(%d, %d, %d) = %d, %d, %v; want %d, %d, %v",
					tc.written, tc.synced, step, off, size, ok, tc.off, tc.size, tc.ok)
			}
		})
	}
}
