// Package etcdsys is the etcd adapter of the benchmark: each replica process
// runs an embedded etcd member (go.etcd.io/etcd/server/v3/embed) of a static
// 3-member cluster on loopback, with fsync on, TickMs 100 and ElectionMs 1000,
// and a clientv3 client given every member's endpoint. Sessions are
// concurrency.NewSession leases; locks are concurrency.NewMutex.
package etcdsys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// Timing of the etcd members: etcd's defaults, which are also the values of
// the comparison's brief.
const (
	TickMs     = 100
	ElectionMs = 1000
)

// keyPrefix is where the mutexes live: lock "x" is the mutex prefix
// "/bench/locks/x/".
const keyPrefix = "/bench/locks/"

// System returns the etcd system.
func System() lockservice.System { return system{} }

type system struct{}

func (system) Name() string         { return "etcd" }
func (system) PortsPerReplica() int { return 2 } // peer, client

func memberName(i int) string { return fmt.Sprintf("m%d", i) }

func httpURL(addr string) url.URL { return url.URL{Scheme: "http", Host: addr} }

// config builds the embed configuration of replica cfg.Index.
func config(cfg lockservice.ReplicaConfig) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = memberName(cfg.Index)
	ec.Dir = cfg.DataDir
	peer, client := httpURL(cfg.Addrs[cfg.Index][0]), httpURL(cfg.Addrs[cfg.Index][1])
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	var initial []string
	for i, a := range cfg.Addrs {
		u := httpURL(a[0])
		initial = append(initial, memberName(i)+"="+u.String())
	}
	ec.InitialCluster = strings.Join(initial, ",")
	ec.InitialClusterToken = "raftlock-bench"
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.TickMs, ec.ElectionMs = TickMs, ElectionMs
	ec.UnsafeNoFsync = false // never: durability as in production
	// Compact history older than a minute, as a production deployment would
	// (Kubernetes compacts every 5 minutes); without it etcd keeps every
	// revision of every released lock forever and the memory figure would
	// charge etcd for history nobody asked it to keep.
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1m"
	ec.Logger, ec.LogLevel, ec.LogOutputs = "zap", "error", []string{"stderr"}
	return ec
}

// StartReplica starts the member and its client and waits until the member
// serves requests.
func (system) StartReplica(ctx context.Context, cfg lockservice.ReplicaConfig) (lockservice.Replica, error) {
	e, err := embed.StartEtcd(config(cfg))
	if err != nil {
		return nil, fmt.Errorf("etcd: start member %d: %w", cfg.Index, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd: member %d: %w", cfg.Index, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcd: member %d not ready: %w", cfg.Index, ctx.Err())
	}
	var endpoints []string
	for _, a := range cfg.Addrs {
		u := httpURL(a[1])
		endpoints = append(endpoints, u.String())
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		Context:     context.Background(),
	})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("etcd: client: %w", err)
	}
	local := httpURL(cfg.Addrs[cfg.Index][1])
	return &replica{e: e, cli: cli, local: local.String()}, nil
}

type replica struct {
	e     *embed.Etcd
	cli   *clientv3.Client
	local string // this member's client URL
}

// Snapshot implements lockservice.Snapshotter: this member's backend
// snapshot (what etcdctl snapshot save reads), read to the end.
func (r *replica) Snapshot(ctx context.Context) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{r.local}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, fmt.Errorf("etcd: snapshot client: %w", err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("etcd: snapshot: %w", err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if err != nil {
		return n, fmt.Errorf("etcd: snapshot: %w", err)
	}
	return n, nil
}

func (r *replica) NewSession(ctx context.Context, ttl time.Duration) (lockservice.Session, error) {
	secs := int((ttl + time.Second - 1) / time.Second)
	// The session's keepalive must outlive ctx: it is bound to the client's
	// context, and ctx only bounds the lease grant through the client call
	// timeout below.
	type result struct {
		s   *concurrency.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := concurrency.NewSession(r.cli, concurrency.WithTTL(secs))
		ch <- result{s, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			return nil, fmt.Errorf("etcd: new session: %w", res.err)
		}
		return &session{s: res.s}, nil
	case <-ctx.Done():
		go func() { // do not leak a lease granted after we gave up
			if res := <-ch; res.err == nil {
				res.s.Close()
			}
		}()
		return nil, fmt.Errorf("etcd: new session: %w", ctx.Err())
	}
}

func (r *replica) Status(context.Context) (lockservice.Status, error) {
	s := r.e.Server
	return lockservice.Status{Leader: s.Leader() == s.MemberID(), LogIndex: s.CommittedIndex()}, nil
}

func (r *replica) Close(ctx context.Context) error {
	errc := r.cli.Close()
	done := make(chan struct{})
	go func() { r.e.Close(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.Join(errc, fmt.Errorf("etcd: close member: %w", ctx.Err()))
	}
	return errc
}

type session struct{ s *concurrency.Session }

func (s *session) Lock(ctx context.Context, name string) (lockservice.Lease, error) {
	m := concurrency.NewMutex(s.s, keyPrefix+name+"/")
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return lease{m}, nil
}

func (s *session) Done() <-chan struct{} { return s.s.Done() }

func (s *session) Close(context.Context) error { return s.s.Close() }

type lease struct{ m *concurrency.Mutex }

func (l lease) Unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// etcd has no counting semaphore (no SemaphoreSession). Its closest
// read-write lock is the experimental recipe (client/v3/experimental/
// recipes RWMutex): RLock and Lock take no context, so a call that ctx
// gives up on keeps waiting in its goroutine until it is granted or the
// session ends; its key is released with the session.

// RLock implements lockservice.RWSession with recipe.RWMutex.
func (s *session) RLock(ctx context.Context, name string) (lockservice.Lease, error) {
	return s.rw(ctx, name, true)
}

// WLock implements lockservice.RWSession with recipe.RWMutex.
func (s *session) WLock(ctx context.Context, name string) (lockservice.Lease, error) {
	return s.rw(ctx, name, false)
}

func (s *session) rw(ctx context.Context, name string, read bool) (lockservice.Lease, error) {
	m := recipe.NewRWMutex(s.s, keyPrefix+"rw/"+name)
	done := make(chan error, 1)
	go func() {
		if read {
			done <- m.RLock()
		} else {
			done <- m.Lock()
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return rwLease{m, read}, nil
	case <-ctx.Done():
		go func() { // release it if it is granted after all
			if <-done == nil {
				m.Unlock()
			}
		}()
		return nil, ctx.Err()
	}
}

type rwLease struct {
	m    *recipe.RWMutex
	read bool
}

func (l rwLease) Unlock(context.Context) error {
	if l.read {
		return l.m.RUnlock()
	}
	return l.m.Unlock()
}
