package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Redis is a fence kept in Redis: one key per resource (KeyPrefix +
// resource) holding the highest token admitted, and fenced writes that run
// as one Lua script — compare the caller's token with the stored one, and
// only if it is not older, store it and run the protected commands. Redis
// runs a script without interleaving any other command, so a stale holder
// can never write, even if it paused between its check and its write.
//
// The package imports no Redis client: Eval runs a script with whatever
// client the caller uses. With github.com/redis/go-redis/v9:
//
//	f := &fence.Redis{Eval: func(ctx context.Context, script string, keys []string, args ...any) (any, error) {
//		return rdb.Eval(ctx, script, keys, args...).Result()
//	}}
//	_, err := f.Write(lease.Context(), "invoice:842", uint64(lease.Token()),
//		fence.RedisCommand{Name: "HSET", Key: "invoice:842", Args: []any{"state", "final"}})
//
// What it guarantees, and what not:
//   - The fence key and the written keys must live on one server (Redis
//     Cluster: in one hash slot — give the resource and the data keys the
//     same {hash tag}, e.g. resource "{invoice:842}", key
//     "{invoice:842}:data").
//   - A script is atomic but not transactional: if a command fails (a wrong
//     type, say), the commands before it and the new token stay. Validate
//     before writing; the token staying is safe (the holder was current).
//   - The fence is as durable as Redis is: with asynchronous replication a
//     failover can lose the last token and admit a stale write once. Run
//     Redis with appendfsync always and without failover, or follow writes
//     with WAIT, where that matters.
//   - Tokens are stored as 20-digit decimal strings and compared in two
//     exact halves, so every token up to MaxToken is handled (Lua numbers
//     are doubles: plain tonumber loses precision above 2^53).
//
// Redis keeps one key per resource; see Forget and the package doc on
// cleanup. Redis is safe for concurrent use once configured.
type Redis struct {
	// Eval runs EVAL script with keys and args and returns the reply: Lua
	// tables as []any, integers as int64, bulk strings as string or []byte;
	// required.
	Eval func(ctx context.Context, script string, keys []string, args ...any) (any, error)
	// KeyPrefix is prepended to the resource to make its fence key; default
	// DefaultRedisPrefix.
	KeyPrefix string
	// OnReject, if set, is called for every refused stale write or forget
	// (metrics, logging), after the script ran.
	OnReject func(resource string, token, highest uint64)
}

// DefaultRedisPrefix is the fence keys' prefix when Redis.KeyPrefix is empty.
const DefaultRedisPrefix = "raftlock:fence:"

// RedisCommand is one command of a fenced write: Name, then Key, then Args
// (e.g. {Name: "SET", Key: "doc:1", Args: []any{"body"}}). Key is passed to
// the script in KEYS, as Redis Cluster needs; a command that touches other
// keys through Args works on a single server only.
type RedisCommand struct {
	Name string
	Key  string
	Args []any
}

// redisScript: KEYS[1] is the fence key, KEYS[1+i] the key of command i.
// ARGV[1] is the mode ("w" write, "f" forget), ARGV[2] the token as 20
// digits, ARGV[3] the number of commands, then per command its name, its
// argument count and its arguments. Reply: {1, {results…}} admitted,
// {0, highest} refused.
const redisScript = `
local function older(a, b)
  local ah, bh = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if ah ~= bh then return ah < bh end
  return tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11))
end
local tok = ARGV[2]
local cur = redis.call('GET', KEYS[1])
if cur then
  if string.len(cur) ~= 20 or not string.match(cur, '^%d+$') then
    return redis.error_reply('fence: key ' .. KEYS[1] .. ' holds no fencing token')
  end
  if older(tok, cur) then return {0, cur} end
end
if ARGV[1] == 'f' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], tok) end
local out, i = {}, 4
for c = 1, tonumber(ARGV[3]) do
  local name, argc = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  out[c] = redis.call(name, KEYS[c + 1], unpack(ARGV, i, i + argc - 1))
  i = i + argc
end
return {1, out}
`

// Write runs cmds if token is at least the highest token stored for
// resource, and stores token as the highest — in one script. A lower token
// is rejected with an error wrapping ErrStaleToken and no command runs.
// The result holds each command's reply. No commands: an admission only.
func (f *Redis) Write(ctx context.Context, resource string, token uint64, cmds ...RedisCommand) ([]any, error) {
	return f.run(ctx, "w", resource, token, cmds)
}

// Forget deletes the fence key of a resource that is gone, and runs cmds
// (e.g. DEL of the resource's data) in the same script, if token is at least
// the stored token; otherwise it returns an error wrapping ErrStaleToken
// and changes nothing. After Forget a stale holder's write is admitted as a
// first write: see the package doc on cleanup.
func (f *Redis) Forget(ctx context.Context, resource string, token uint64, cmds ...RedisCommand) ([]any, error) {
	return f.run(ctx, "f", resource, token, cmds)
}

func (f *Redis) key(resource string) string {
	if f.KeyPrefix == "" {
		return DefaultRedisPrefix + resource
	}
	return f.KeyPrefix + resource
}

func (f *Redis) run(ctx context.Context, mode, resource string, token uint64, cmds []RedisCommand) ([]any, error) {
	if err := check(resource, token, MaxToken); err != nil {
		return nil, err
	}
	if f.Eval == nil {
		return nil, fmt.Errorf("%w: Redis.Eval is nil", ErrInvalid)
	}
	keys := []string{f.key(resource)}
	args := []any{mode, fmt.Sprintf("%020d", token), len(cmds)}
	for _, c := range cmds {
		if c.Name == "" {
			return nil, fmt.Errorf("%w: Redis command without a name", ErrInvalid)
		}
		keys = append(keys, c.Key)
		args = append(args, c.Name, len(c.Args))
		args = append(args, c.Args...)
	}
	reply, err := f.Eval(ctx, redisScript, keys, args...)
	if err != nil {
		return nil, fmt.Errorf("fence: redis %q: %w", resource, err)
	}
	admitted, rest, err := parseRedisReply(reply)
	if err != nil {
		return nil, fmt.Errorf("fence: redis %q: %w", resource, err)
	}
	if admitted {
		results, _ := rest.([]any)
		return results, nil
	}
	highest, err := parseRedisToken(rest)
	if err != nil {
		return nil, fmt.Errorf("fence: redis %q: %w", resource, err)
	}
	if f.OnReject != nil {
		f.OnReject(resource, token, highest)
	}
	return nil, staleError(resource, token, highest)
}

var errRedisReply = errors.New("unexpected script reply")

func parseRedisReply(reply any) (admitted bool, rest any, err error) {
	r, ok := reply.([]any)
	if !ok || len(r) != 2 {
		return false, nil, fmt.Errorf("%w %#v", errRedisReply, reply)
	}
	switch r[0] {
	case int64(1):
		return true, r[1], nil
	case int64(0):
		return false, r[1], nil
	}
	return false, nil, fmt.Errorf("%w %#v", errRedisReply, reply)
}

func parseRedisToken(v any) (uint64, error) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case []byte: // clients that return bulk strings as bytes (redigo)
		s = string(v)
	default:
		return 0, fmt.Errorf("%w: token %#v", errRedisReply, v)
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: token %q", errRedisReply, s)
	}
	return t, nil
}

// Highest returns the highest token stored for resource (0 if none).
func (f *Redis) Highest(ctx context.Context, resource string) (uint64, error) {
	if err := check(resource, 1, MaxToken); err != nil {
		return 0, err
	}
	if f.Eval == nil {
		return 0, fmt.Errorf("%w: Redis.Eval is nil", ErrInvalid)
	}
	reply, err := f.Eval(ctx, `return redis.call('GET', KEYS[1]) or ''`, []string{f.key(resource)})
	if err != nil {
		return 0, fmt.Errorf("fence: redis %q: %w", resource, err)
	}
	if b, ok := reply.([]byte); ok {
		reply = string(b)
	}
	if reply == "" { // no key
		return 0, nil
	}
	t, err := parseRedisToken(reply)
	if err != nil {
		return 0, fmt.Errorf("fence: redis %q: %w", resource, err)
	}
	return t, nil
}
