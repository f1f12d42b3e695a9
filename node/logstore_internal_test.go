package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/internal/storage"
)

// Config.LogStore crosses into package storage by conversion: the names on
// both sides must be the same.
func TestLogStoreNamesMatchStorage(t *testing.T) {
	for _, k := range [][2]string{
		{string(LogStoreBolt), string(storage.Bolt)},
		{string(LogStoreWAL), string(storage.WAL)},
	} {
		if k[0] != k[1] {
			t.Errorf("node names %q, storage %q", k[0], k[1])
		}
	}
}

// LogStoreWAL is valid exactly when the build has the WAL (build tag
// raftwal), and always with InMemory (which ignores LogStore).
func TestLogStoreWALNeedsItsBuildTag(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.BindAddr, cfg.DataDir, cfg.Bootstrap, cfg.AllowPlaintext = "n1", "127.0.0.1:0", t.TempDir(), true, true
	cfg.LogStore = LogStoreWAL
	err := cfg.Validate()
	if (err == nil) != storage.WALBuilt {
		t.Fatalf("Validate with LogStoreWAL (WAL built: %v): %v", storage.WALBuilt, err)
	}
	if err != nil && !strings.Contains(err.Error(), "-tags raftwal") {
		t.Fatalf("the refusal does not name the build tag: %v", err)
	}
	cfg.DataDir, cfg.InMemory = "", true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("InMemory with LogStoreWAL: %v", err)
	}
	if err := MigrateLogStore(t.Context(), t.TempDir(), LogStoreBolt, LogStoreWAL); !storage.WALBuilt && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "-tags raftwal")) {
		t.Fatalf("MigrateLogStore without the WAL built: %v", err)
	}
}
