package fence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/fence/internal/fencesuite"
)

// memoryStore is fencesuite's Store over fence.Memory.
type memoryStore struct {
	f    fence.Memory
	mu   sync.Mutex // guards the map; a resource's data are guarded by the fence
	data map[string]*memData
}

type memData struct {
	cur string
	log []string
}

func (s *memoryStore) get(resource string) *memData {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		s.data = map[string]*memData{}
	}
	d := s.data[resource]
	if d == nil {
		d = &memData{}
		s.data[resource] = d
	}
	return d
}

func (s *memoryStore) Write(_ context.Context, resource string, token uint64, value string) error {
	return s.f.Do(resource, token, func() error {
		d := s.get(resource)
		d.cur, d.log = value, append(d.log, value)
		return nil
	})
}

func (s *memoryStore) State(_ context.Context, resource string) (string, []string, error) {
	var cur string
	var log []string
	// Read under the fence's serialization of the resource: Do with the
	// highest token (admits, writes nothing new).
	if h := s.f.Highest(resource); h > 0 {
		err := s.f.Do(resource, h, func() error {
			d := s.get(resource)
			cur, log = d.cur, append([]string(nil), d.log...)
			return nil
		})
		return cur, log, err
	}
	return "", nil, nil
}

func (s *memoryStore) Highest(_ context.Context, resource string) (uint64, error) {
	return s.f.Highest(resource), nil
}

func (s *memoryStore) Forget(_ context.Context, resource string, token uint64) error {
	return s.f.Forget(resource, token)
}

func TestMemorySuite(t *testing.T) {
	fencesuite.Run(t, &memoryStore{}, fencesuite.Config{MaxToken: fence.MaxToken})
}

func TestSQLiteSuite(t *testing.T) {
	s := &fencesuite.SQLStore{Fence: &fence.SQL{DB: openSQLite(t), Dialect: fence.SQLite}, Prefix: "suite"}
	if err := s.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	fencesuite.Run(t, s, fencesuite.Config{MaxToken: fence.MaxSQLToken, Rounds: 50})
}

// memObjects is an in-memory ObjectStore with per-write versions (like GCS
// generations): no local S3, GCS or Azure server runs in these tests.
type memObjects struct {
	mu      sync.Mutex
	objs    map[string]fence.StoredObject
	version int
}

func (m *memObjects) Get(_ context.Context, key string) (fence.StoredObject, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	return o, ok, nil
}

func (m *memObjects) Put(_ context.Context, key string, body []byte, token uint64, ifVersion string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objs == nil {
		m.objs = map[string]fence.StoredObject{}
	}
	cur, ok := m.objs[key]
	if (ifVersion == "" && ok) || (ifVersion != "" && (!ok || cur.Version != ifVersion)) {
		return fmt.Errorf("412: %w", fence.ErrPrecondition)
	}
	m.version++
	m.objs[key] = fence.StoredObject{Body: append([]byte(nil), body...), Token: token, Version: fmt.Sprint(m.version)}
	return nil
}

// objectStore is fencesuite's Store over fence.Object: the object's body is
// the JSON of {cur, log}, updated read-modify-write.
type objectStore struct{ f fence.Object }

type objectBody struct {
	Cur string
	Log []string
}

func (s *objectStore) Write(ctx context.Context, resource string, token uint64, value string) error {
	return s.f.Update(ctx, resource, token, func(body []byte, exists bool) ([]byte, error) {
		var b objectBody
		if exists {
			if err := json.Unmarshal(body, &b); err != nil {
				return nil, err
			}
		}
		b.Cur, b.Log = value, append(b.Log, value)
		return json.Marshal(b)
	})
}

func (s *objectStore) State(ctx context.Context, resource string) (string, []string, error) {
	o, ok, err := s.f.Store.Get(ctx, resource)
	if err != nil || !ok {
		return "", nil, err
	}
	var b objectBody
	err = json.Unmarshal(o.Body, &b)
	return b.Cur, b.Log, err
}

func (s *objectStore) Highest(ctx context.Context, resource string) (uint64, error) {
	return s.f.Highest(ctx, resource)
}

// Forget: an object keeps its token; forgetting it is deleting the object
// (see fence.Object), which this store does not model.
func (s *objectStore) Forget(ctx context.Context, resource string, token uint64) error {
	o, ok, err := s.f.Store.Get(ctx, resource)
	switch {
	case err != nil || !ok:
		return err
	case token < o.Token:
		return fmt.Errorf("%w: %d < %d", fence.ErrStaleToken, token, o.Token)
	}
	m := s.f.Store.(*memObjects)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, resource)
	return nil
}

func TestObjectSuite(t *testing.T) {
	s := &objectStore{f: fence.Object{Store: &memObjects{}, Attempts: 1000}}
	fencesuite.Run(t, s, fencesuite.Config{MaxToken: fence.MaxToken})
}
