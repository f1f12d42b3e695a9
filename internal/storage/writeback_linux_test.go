package storage

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A snapshot written through stepSyncStore into raft's real file store is
// written back in whole steps as it is written, and reads back intact; a
// failing writeback stops the steps, not the snapshot.
func TestSnapshotWritebackSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  bool
		calls []int64 // offsets written back
	}{
		{"steps", false, []int64{0, snapshotWritebackStep}},
		{"a failed writeback stops the steps", true, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			store := stepSyncStore{SnapshotStore: files, base: dir, logger: hclog.NewNullLogger()}
			_, trans := raft.NewInmemTransport("")
			sink, err := store.Create(1, 10, 2, raft.Configuration{}, 1, trans)
			if err != nil {
				t.Fatal(err)
			}
			s, ok := sink.(*stepSyncSink)
			if !ok {
				t.Fatalf("Create returned %T, not a stepSyncSink: the state file was not at %s", sink, snapshotStatePath(dir, sink.ID()))
			}
			var calls []int64
			s.writeback = func(f *os.File, off, n int64) error {
				calls = append(calls, off)
				if n != snapshotWritebackStep {
					t.Errorf("wrote back %d bytes at %d, want one step (%d)", n, off, snapshotWritebackStep)
				}
				if tc.fail {
					return errors.New("injected")
				}
				return writeback(f, off, n)
			}
			want := bytes.Repeat([]byte("0123456789abcdef"), (2*snapshotWritebackStep+snapshotWritebackStep/2)/16)
			for chunk := range slices.Chunk(want, 64<<10) {
				if _, err := sink.Write(chunk); err != nil {
					t.Fatal(err)
				}
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(calls, tc.calls) {
				t.Fatalf("writebacks at %v, want %v", calls, tc.calls)
			}
			_, rc, err := store.Open(sink.ID())
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes, not the %d written", len(got), len(want))
			}
		})
	}
}
