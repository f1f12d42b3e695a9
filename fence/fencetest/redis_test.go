package fencetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/fence/internal/fencesuite"
)

func openRedis(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: server(t, "RAFTLOCK_TEST_REDIS")})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis: %v", err)
	}
	return rdb
}

// redisFence is the fence over a go-redis client: Eval is the whole adapter.
func redisFence(rdb *redis.Client) *fence.Redis {
	return &fence.Redis{Eval: func(ctx context.Context, script string, keys []string, args ...any) (any, error) {
		return rdb.Eval(ctx, script, keys, args...).Result()
	}}
}

// redisStore is the suite's Store over fence.Redis: per resource a string
// key with the current value and a list with the log, written in the
// fenced script.
type redisStore struct {
	rdb *redis.Client
	f   *fence.Redis
}

func (s *redisStore) Write(ctx context.Context, resource string, token uint64, value string) error {
	_, err := s.f.Write(ctx, resource, token,
		fence.RedisCommand{Name: "SET", Key: "cur:" + resource, Args: []any{value}},
		fence.RedisCommand{Name: "RPUSH", Key: "log:" + resource, Args: []any{value}})
	return err
}

func (s *redisStore) State(ctx context.Context, resource string) (string, []string, error) {
	cur, err := s.rdb.Get(ctx, "cur:"+resource).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", nil, err
	}
	log, err := s.rdb.LRange(ctx, "log:"+resource, 0, -1).Result()
	if len(log) == 0 {
		log = nil
	}
	return cur, log, err
}

func (s *redisStore) Highest(ctx context.Context, resource string) (uint64, error) {
	return s.f.Highest(ctx, resource)
}

func (s *redisStore) Forget(ctx context.Context, resource string, token uint64) error {
	_, err := s.f.Forget(ctx, resource, token)
	return err
}

func TestRedis(t *testing.T) {
	rdb := openRedis(t)
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "redis_version:") {
			t.Logf("Redis %s", strings.TrimSpace(strings.TrimPrefix(l, "redis_version:")))
		}
	}
	fencesuite.Run(t, &redisStore{rdb: rdb, f: redisFence(rdb)}, fencesuite.Config{MaxToken: fence.MaxToken})
}

// Lua numbers are doubles: 2^53 and 2^53+1 are the same number there. The
// script compares tokens exactly, so 2^53 after 2^53+1 is refused.
func TestRedisTokensBeyondDoublePrecision(t *testing.T) {
	ctx := context.Background()
	rdb := openRedis(t)
	f := redisFence(rdb)
	r := fmt.Sprintf("precision/%d", rdb.Incr(ctx, "fencetest:runs").Val())
	const big = uint64(1) << 53
	if _, err := f.Write(ctx, r, big+1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, r, big); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 2^53 after 2^53+1: %v, want ErrStaleToken", err)
	}
	if h, err := f.Highest(ctx, r); err != nil || h != big+1 {
		t.Fatalf("highest %d, %v", h, err)
	}
	// The low half decides when the high halves are equal.
	r2 := r + "/halves"
	for _, tok := range []uint64{12345678901234567890, 12345678901234567891} {
		if _, err := f.Write(ctx, r2, tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Write(ctx, r2, 12345678901234567889); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("lower low half: %v", err)
	}
	if _, err := f.Write(ctx, r2, 12345678891234567899); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("lower high half: %v", err)
	}
}

// What the script does not promise: rollback. A command that fails leaves
// the commands before it and the new token in place (documented on
// fence.Redis); the reply is an error, and the fence still refuses older
// tokens.
func TestRedisFailedCommand(t *testing.T) {
	ctx := context.Background()
	rdb := openRedis(t)
	f := redisFence(rdb)
	r := fmt.Sprintf("failing/%d", rdb.Incr(ctx, "fencetest:runs").Val())
	rdb.RPush(ctx, r+"/list", "x")
	_, err := f.Write(ctx, r, 10,
		fence.RedisCommand{Name: "SET", Key: r + "/first", Args: []any{"done"}},
		fence.RedisCommand{Name: "SET", Key: r + "/list", Args: []any{"y"} /* a list: fine, SET overwrites */},
		fence.RedisCommand{Name: "INCR", Key: r + "/first"}) // not an integer: fails
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("failing command: %v", err)
	}
	if v := rdb.Get(ctx, r+"/first").Val(); v != "done" {
		t.Fatalf("the command before the failure: %q", v)
	}
	if h, _ := f.Highest(ctx, r); h != 10 {
		t.Fatalf("highest %d, want 10 (the token stays)", h)
	}
	if _, err := f.Write(ctx, r, 9); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("older token: %v", err)
	}
	// A fence key holding something else is an error, not a guess.
	rdb.Set(ctx, fence.DefaultRedisPrefix+r+"/garbage", "12", 0)
	if _, err := f.Write(ctx, r+"/garbage", 99); err == nil || !strings.Contains(err.Error(), "holds no fencing token") {
		t.Fatalf("fence key with a non-token value: %v", err)
	}
	// Results come back per command; Forget runs its commands with it.
	res, err := f.Write(ctx, r, 11, fence.RedisCommand{Name: "INCRBY", Key: r + "/n", Args: []any{5}})
	if err != nil || len(res) != 1 || res[0] != int64(5) {
		t.Fatalf("results %#v, %v", res, err)
	}
	if _, err := f.Forget(ctx, r, 11, fence.RedisCommand{Name: "DEL", Key: r + "/n"}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, r+"/n", fence.DefaultRedisPrefix+r).Val(); n != 0 {
		t.Fatalf("%d keys left after Forget", n)
	}
}
