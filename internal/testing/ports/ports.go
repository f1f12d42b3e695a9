// Package ports picks free loopback ports for replica processes: the
// examples', the test harnesses' and the bench's (bench/internal/cluster).
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Free returns n distinct loopback addresses ("127.0.0.1:port") whose port
// is free for both TCP and UDP right now (gossip uses both). The ports are
// chosen at random below the kernel's ephemeral range, so that the outgoing
// connections of every process on the machine (which take ephemeral ports)
// cannot grab one between this check and the replica's own bind.
func Free(n int) ([]string, error) {
	low := ephemeralLow()
	const floor = 10000
	if low-floor < 10*n {
		return nil, fmt.Errorf("ports: the ephemeral range starts at %d, too low to pick %d ports below it", low, n)
	}
	var addrs []string
	var held []func() error
	defer func() {
		for _, c := range held {
			c()
		}
	}()
	taken := map[int]bool{}
	for tries := 0; len(addrs) < n && tries < 200*n; tries++ {
		port := floor + rand.IntN(low-floor)
		if taken[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			ln.Close()
			continue
		}
		held = append(held, ln.Close, pc.Close)
		taken[port] = true
		addrs = append(addrs, addr)
	}
	if len(addrs) < n {
		return nil, fmt.Errorf("ports: found only %d free ports of %d", len(addrs), n)
	}
	return addrs, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768 // Linux's default
}
