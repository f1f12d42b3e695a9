package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// reservePorts returns n distinct free loopback addresses. They are chosen
// below the kernel's ephemeral port range, so that the outgoing connections
// of the replicas (which take ephemeral ports) cannot grab them between this
// check and the replica's bind.
func reservePorts(n int) ([]string, error) {
	low := ephemeralLow()
	const floor = 10000
	if low-floor < 10*n {
		return nil, fmt.Errorf("cluster: ephemeral range starts at %d, too low to pick %d ports below it", low, n)
	}
	var (
		addrs []string
		held  []net.Listener
	)
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(addrs) < n && tries < 100*n; tries++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(floor+rand.IntN(low-floor)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		held = append(held, l)
		addrs = append(addrs, addr)
	}
	if len(addrs) < n {
		return nil, fmt.Errorf("cluster: found only %d free ports of %d", len(addrs), n)
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
	return 32768 // Linux default
}
