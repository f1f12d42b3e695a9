package transport

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestInboundLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  InboundLimits
		want string // "" = valid
	}{
		{"zero (defaults)", InboundLimits{}, ""},
		{"defaults", defaultInboundLimits(), ""},
		{"negative reserve", InboundLimits{MemberReserve: -1}, "Inbound.MemberReserve must not be negative (got -1)"},
		{"negative first byte", InboundLimits{FirstByteTimeout: -time.Second}, "Inbound.FirstByteTimeout must not be negative (got -1s)"},
		{"per host above total", InboundLimits{MaxConnsPerHost: 600}, "Inbound.MaxConnsPerHost 600 exceeds Inbound.MaxConns 512"},
		{"handshakes above conns", InboundLimits{MaxConns: 100, MaxConnsPerHost: 10}, "Inbound.MaxHandshakes 128 exceeds Inbound.MaxConns 100"},
		{"handshakes per host above total", InboundLimits{MaxHandshakesPerHost: 200}, "Inbound.MaxHandshakesPerHost 200 exceeds Inbound.MaxHandshakes 128"},
		{"failures per host above total", InboundLimits{FailedHandshakesPerHost: 100}, "Inbound.FailedHandshakesPerHost 100 exceeds Inbound.FailedHandshakes 64"},
		{"frame bytes per conn below a message", InboundLimits{MaxFrameBytesPerConn: 1 << 20}, "Inbound.MaxFrameBytesPerConn 1048576 is below MaxMessageSize 16777216"},
		{"frame bytes per conn above total", InboundLimits{MaxFrameBytesPerConn: 64 << 20, MaxFrameBytes: 32 << 20}, "Inbound.MaxFrameBytesPerConn 67108864 exceeds Inbound.MaxFrameBytes 33554432"},
		{"small total lowers the per-conn default", InboundLimits{MaxFrameBytes: 16 << 20}, ""},
		{"first byte above handshake acts as handshake", InboundLimits{FirstByteTimeout: time.Minute}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{BindAddr: "127.0.0.1:0", Inbound: tc.lim}.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, errInvalidConfig)):
				t.Fatalf("Validate() = %v, want an errInvalidConfig containing %q", err, tc.want)
			}
		})
	}
	// Config.Validate checks the limits against its own MaxMessageSize.
	cfg := Config{BindAddr: "127.0.0.1:0", MaxMessageSize: 1 << 20, Inbound: InboundLimits{MaxFrameBytesPerConn: 1 << 20}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("1 MiB per connection with 1 MiB messages: %v", err)
	}
	cfg.MaxMessageSize = 2 << 20
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "is below MaxMessageSize 2097152") {
		t.Fatalf("1 MiB per connection with 2 MiB messages: %v", err)
	}
	if d := (InboundLimits{FirstByteTimeout: time.Minute}).withDefaults(defaultMaxMessageSize); d.FirstByteTimeout != d.HandshakeTimeout {
		t.Fatalf("FirstByteTimeout %v above HandshakeTimeout %v is not capped", d.FirstByteTimeout, d.HandshakeTimeout)
	}
}

// planner returns a connLimits with the default limits.
func planner() *connLimits {
	l := newConnLimits(InboundLimits{}.withDefaults(defaultMaxMessageSize))
	return &l
}

// admitN admits up to n connections from key and returns how many were
// admitted and the reason the first refused one got ("" if none).
func admitN(l *connLimits, key string, member bool, n int, now time.Time) (int, string) {
	for i := range n {
		if r := l.admit(key, member, now); r != "" {
			return i, r
		}
	}
	return n, ""
}

// Strangers get at most MaxHandshakes slots, MaxHandshakesPerHost each;
// members get MemberReserve more, a quarter of it per address.
func TestConnLimitsMemberReserve(t *testing.T) {
	now := time.Now()
	l := planner()
	if n, r := admitN(l, "10.0.0.1", false, 100, now); n != 8 || r != rejectHostHandshakeLimit {
		t.Fatalf("one stranger address: %d handshakes, then %q; want 8, then %q", n, r, rejectHostHandshakeLimit)
	}
	for i := 2; i <= 16; i++ {
		if n, _ := admitN(l, fmt.Sprintf("10.0.0.%d", i), false, 8, now); n != 8 {
			t.Fatalf("stranger %d got %d of 8 handshakes", i, n)
		}
	}
	if r := l.admit("10.0.0.17", false, now); r != rejectHandshakeLimit {
		t.Fatalf("17th stranger address with 128 handshakes held: %q, want %q", r, rejectHandshakeLimit)
	}
	// The general pool is full: members use the reserve, 8 + 16 each.
	if n, r := admitN(l, "10.0.1.1", true, 100, now); n != 24 || r != rejectHostHandshakeLimit {
		t.Fatalf("member address: %d handshakes, then %q; want 24, then %q", n, r, rejectHostHandshakeLimit)
	}
	// A stranger sharing a member's address is that member: it can take
	// this address's share, not another member's.
	if n, _ := admitN(l, "10.0.1.2", true, 24, now); n != 24 {
		t.Fatalf("second member address got %d of 24", n)
	}
	if n, r := admitN(l, "10.0.1.3", true, 24, now); n != 16 || r != rejectHandshakeLimit {
		t.Fatalf("third member address: %d, then %q; want the reserve's last 16, then %q", n, r, rejectHandshakeLimit)
	}
	// Strangers never get the reserve, even as handshakes complete: a
	// stranger slot frees only when the total falls below MaxHandshakes.
	for range 24 {
		l.handshakeDone("10.0.1.1")
	}
	if r := l.admit("10.0.0.17", false, now); r != rejectHandshakeLimit {
		t.Fatalf("stranger with 128 + 64 - 24 handshakes held: %q, want %q", r, rejectHandshakeLimit)
	}
	if l.handshakes != 128+64-24 || l.conns != 128+64 {
		t.Fatalf("counted %d handshakes, %d conns", l.handshakes, l.conns)
	}
}

// Open connections: strangers up to MaxConns, members MemberReserve more;
// MaxConnsPerHost for everyone.
func TestConnLimitsOpenConns(t *testing.T) {
	now := time.Now()
	l := planner()
	for i := range 8 {
		host := fmt.Sprintf("10.0.0.%d", i)
		for range 64 {
			if r := l.admit(host, false, now); r != "" {
				t.Fatalf("stranger %s: %q", host, r)
			}
			l.succeeded(host, false, now)
			l.handshakeDone(host)
		}
		if r := l.admit(host, false, now); r != rejectConnLimit && r != rejectHostLimit {
			t.Fatalf("stranger %s over its 64: %q", host, r)
		}
	}
	if r := l.admit("10.0.0.99", false, now); r != rejectConnLimit {
		t.Fatalf("stranger with 512 open: %q, want %q", r, rejectConnLimit)
	}
	n, r := admitN(l, "10.0.1.1", true, 100, now)
	if n != 24 || r != rejectHostHandshakeLimit {
		t.Fatalf("member with 512 open: %d, then %q", n, r)
	}
	for range n {
		l.succeeded("10.0.1.1", true, now)
		l.handshakeDone("10.0.1.1")
	}
	if n, r := admitN(l, "10.0.1.2", true, 100, now); n != 24 || r != rejectHostHandshakeLimit {
		t.Fatalf("second member: %d, then %q", n, r)
	}
	for range 24 {
		l.succeeded("10.0.1.2", true, now)
		l.handshakeDone("10.0.1.2")
	}
	if n, r := admitN(l, "10.0.1.3", true, 100, now); n != 16 || r != rejectConnLimit {
		t.Fatalf("third member: %d, then %q; want the reserve's last 16, then %q", n, r, rejectConnLimit)
	}
	// Releasing forgets idle addresses (once their failures are earned
	// back; these succeeded).
	for range 16 {
		l.succeeded("10.0.1.3", true, now)
		l.handshakeDone("10.0.1.3")
		l.release("10.0.1.3", false)
	}
	if _, ok := l.hosts["10.0.1.3"]; ok {
		t.Fatal("an address without connections or failures is still tracked")
	}
}

// Failed handshakes: an address may save up ten seconds of its budget,
// then is refused until it has earned a failure back; the strangers
// together likewise, while members go on. Handshakes in progress count;
// one that succeeds is refunded.
func TestConnLimitsFailureBudget(t *testing.T) {
	now := time.Now()
	l := planner()
	fails := 0
	for ; fails < 1000; fails++ {
		if r := l.admit("10.0.0.1", false, now); r != "" {
			if r != rejectFailureLimit {
				t.Fatalf("refused for %q, want %q", r, rejectFailureLimit)
			}
			break
		}
		l.release("10.0.0.1", true) // failed: its charge stays
	}
	if fails != 40 {
		t.Fatalf("%d failed handshakes before the address was refused, want 40 (4/s for 10 s)", fails)
	}
	if r := l.admit("10.0.0.2", false, now); r != "" {
		t.Fatalf("another address refused: %q", r)
	}
	l.succeeded("10.0.0.2", false, now)
	l.handshakeDone("10.0.0.2")
	l.release("10.0.0.2", false)
	if _, ok := l.hosts["10.0.0.2"]; ok {
		t.Fatal("an address whose handshake succeeded is still tracked after its connection closed")
	}
	now = now.Add(time.Second) // 4 failures earned back
	if n, _ := admitN(l, "10.0.0.1", false, 4, now); n != 4 {
		t.Fatalf("after a second: %d admitted, want 4", n)
	}
	for range 4 {
		l.release("10.0.0.1", true)
	}
	if r := l.admit("10.0.0.1", false, now); r != rejectFailureLimit {
		t.Fatalf("after spending them again: %q", r)
	}
	// Many addresses: the strangers' budget (64/s, 640 saved) runs out.
	l = planner()
	total := 0
	for i := 0; i < 10000 && total < 2000; i++ {
		host := fmt.Sprintf("10.1.%d.%d", i/250, i%250)
		if r := l.admit(host, false, now); r != "" {
			if r != rejectFailureLimit {
				t.Fatalf("%s refused for %q", host, r)
			}
			break
		}
		l.release(host, true)
		total++
	}
	if total != 640 {
		t.Fatalf("strangers caused %d failed handshakes before all were refused, want 640", total)
	}
	if r := l.admit("10.1.200.1", false, now); r != rejectFailureLimit {
		t.Fatalf("a fresh stranger: %q, want %q", r, rejectFailureLimit)
	}
	if r := l.admit("10.0.1.1", true, now); r != "" {
		t.Fatalf("a member while strangers are over budget: %q", r)
	}
	// Addresses whose budgets are full again are forgotten once the table
	// grows (here: by addresses with open connections).
	if len(l.hosts) != 641 {
		t.Fatalf("%d addresses tracked, want the 640 that failed and the member's", len(l.hosts))
	}
	now = now.Add(failureBurstSeconds * time.Second)
	l.lim.MaxConns, l.lim.MaxHandshakes = 10000, 10000
	for i := range minSweep {
		host := fmt.Sprintf("10.2.%d.%d", i/250, i%250)
		if r := l.admit(host, false, now); r != "" {
			t.Fatalf("%s after the strangers' budget recovered: %q", host, r)
		}
		l.succeeded(host, false, now)
		l.handshakeDone(host)
	}
	for k := range l.hosts {
		if strings.HasPrefix(k, "10.1.") {
			t.Fatalf("%d addresses tracked (%s among them) after their failures were earned back", len(l.hosts), k)
		}
	}
}

// Handshakes in progress are charged: a member address that starts its
// whole allowance (24) and completes them can go on for ever; one whose
// handshakes all fail is stopped after 40.
func TestConnLimitsChargedInProgress(t *testing.T) {
	now := time.Now()
	l := planner()
	for round := range 100 {
		n, r := admitN(l, "10.0.1.1", true, 100, now)
		if n != 24 || r != rejectHostHandshakeLimit {
			t.Fatalf("round %d: %d admitted, then %q", round, n, r)
		}
		for range n {
			l.succeeded("10.0.1.1", true, now)
			l.handshakeDone("10.0.1.1")
			l.release("10.0.1.1", false)
		}
	}
	n1, _ := admitN(l, "10.0.1.2", true, 24, now)
	for range n1 {
		l.release("10.0.1.2", true)
	}
	n2, r := admitN(l, "10.0.1.2", true, 24, now)
	if n1+n2 != 40 || r != rejectFailureLimit {
		t.Fatalf("failing member address: %d + %d admitted, then %q; want 40, then %q", n1, n2, r, rejectFailureLimit)
	}
}

func TestLimitKey(t *testing.T) {
	for _, tc := range []struct {
		host   string
		member bool
		want   string
	}{
		{"10.0.0.1", false, "10.0.0.1"},
		{"2001:db8:1:2:3::1", false, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::9", false, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3::1", true, "2001:db8:1:2:3::1"},
		{"::1", false, "::1"},
		{"n1", false, "n1"},
	} {
		if got := limitKey(tc.host, tc.member); got != tc.want {
			t.Errorf("limitKey(%q, %v) = %q, want %q", tc.host, tc.member, got, tc.want)
		}
	}
}
