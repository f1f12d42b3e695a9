package proc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// network places the replicas and cuts links between them.
type network interface {
	// Mode names the partition mechanism, for the report.
	Mode() string
	// Host is replica i's IP address.
	Host(i int) string
	// Port is replica i's port for a service (0 Raft, 1 gossip, 2 HTTP).
	Port(i, service int) int
	// RelayHost is the host address the harness's relays listen on, which
	// every replica can reach.
	RelayHost() string
	// Source names the replica a connection to a relay came from ("" if
	// it cannot tell).
	Source(remote net.Addr) string
	// Command runs a program as replica i (inside its namespace).
	Command(i int, name string, args ...string) *exec.Cmd
	// CanPartition reports whether Block works.
	CanPartition() bool
	// Block drops every packet from → to (both replica indexes) until Heal.
	Block(from, to int) error
	// Heal removes every cut.
	Heal() error
	// Close removes what the network created.
	Close() error
}

// ---- loopback: no partitions ----

type loopback struct {
	base int
	why  string
}

func newLoopback(base int, why string) *loopback { return &loopback{base: base, why: why} }

func (l *loopback) Mode() string         { return "loopback, no network faults (" + l.why + ")" }
func (l *loopback) Host(int) string      { return "127.0.0.1" }
func (l *loopback) Port(i, s int) int    { return l.base + 10*i + s }
func (l *loopback) CanPartition() bool   { return false }
func (l *loopback) Block(int, int) error { return fmt.Errorf("loopback network: no partitions") }
func (l *loopback) Heal() error          { return nil }
func (l *loopback) RelayHost() string    { return "127.0.0.1" }
func (l *loopback) Source(net.Addr) string {
	return "" // every replica dials from 127.0.0.1
}
func (l *loopback) Close() error { return nil }
func (l *loopback) Command(_ int, name string, args ...string) *exec.Cmd {
	return exec.Command(name, args...)
}

// ---- network namespaces + nftables ----

// netnsNet gives every replica its own network namespace, joined by veth
// pairs to a bridge in a hub namespace; the host reaches the subnet through
// one more veth pair (the only thing it adds to the host's namespace).
// Partitions are nftables drop rules in the receiving replica's namespace.
// Deleting the namespaces removes everything (bridge, veths, rules).
type netnsNet struct {
	id     string // 4 hex digits: this run
	subnet string // "10.213.X"
	n      int
	mu     sync.Mutex
	cuts   map[int]map[int]bool // to → from → blocked
}

// netnsPrefix names every namespace this package creates.
const netnsPrefix = "rlchaos-"

var rootLinkRE = regexp.MustCompile(`^rlc[0-9a-f]{4}h$`)

// netnsAvailable reports whether namespaces and nftables can be used.
func netnsAvailable() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, tool + " not found"
		}
	}
	return true, ""
}

func run(name string, args ...string) error {
	return runIn("", name, args...)
}

// runIn runs a command (bounded in time) with stdin, returning its output in
// the error.
func runIn(stdin string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, name, args...).Output()
	return string(b), err
}

// cleanupLeftovers removes namespaces and host links of earlier runs that
// died before their own clean-up (callers hold the run lock, so none is
// in use).
func cleanupLeftovers() []string {
	var removed []string
	if out, err := output("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], netnsPrefix) {
				if run("ip", "netns", "del", f[0]) == nil {
					removed = append(removed, "netns "+f[0])
				}
			}
		}
	}
	if out, err := output("ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if rootLinkRE.MatchString(name) {
				if run("ip", "link", "del", name) == nil {
					removed = append(removed, "link "+name)
				}
			}
		}
	}
	return removed
}

func newNetns(n int, id string) (*netnsNet, error) {
	x := 0
	fmt.Sscanf(id[:2], "%x", &x)
	x = 16 + x%200
	nn := &netnsNet{id: id, n: n, subnet: fmt.Sprintf("10.213.%d", x), cuts: map[int]map[int]bool{}}
	// The subnet must be free on the host.
	if out, err := output("ip", "-4", "route", "show"); err == nil && strings.Contains(out, nn.subnet+".") {
		return nil, fmt.Errorf("subnet %s.0/24 already routed on the host", nn.subnet)
	}
	if err := nn.setup(); err != nil {
		nn.Close()
		return nil, err
	}
	return nn, nil
}

func (nn *netnsNet) hub() string      { return netnsPrefix + nn.id + "-hub" }
func (nn *netnsNet) ns(i int) string  { return fmt.Sprintf("%s%s-n%d", netnsPrefix, nn.id, i+1) }
func (nn *netnsNet) rootLink() string { return "rlc" + nn.id + "h" }
func (nn *netnsNet) Mode() string {
	return "netns+nftables (one network namespace per replica, nftables drop rules)"
}
func (nn *netnsNet) Host(i int) string  { return fmt.Sprintf("%s.%d", nn.subnet, i+1) }
func (nn *netnsNet) Port(_, s int) int  { return []int{7400, 7401, 8080}[s] }
func (nn *netnsNet) CanPartition() bool { return true }
func (nn *netnsNet) RelayHost() string  { return nn.subnet + ".254" }

// Source maps a replica's address in the subnet to its host.
func (nn *netnsNet) Source(remote net.Addr) string {
	if a, ok := remote.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

func (nn *netnsNet) setup() error {
	hub := nn.hub()
	steps := [][]string{
		{"ip", "netns", "add", hub},
		{"ip", "-n", hub, "link", "set", "lo", "up"},
		{"ip", "-n", hub, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", hub, "link", "set", "br0", "up"},
		{"ip", "link", "add", nn.rootLink(), "type", "veth", "peer", "name", "hostlink", "netns", hub},
		{"ip", "addr", "add", nn.subnet + ".254/24", "dev", nn.rootLink()},
		{"ip", "link", "set", nn.rootLink(), "up"},
		{"ip", "-n", hub, "link", "set", "hostlink", "master", "br0", "up"},
	}
	for i := range nn.n {
		ns := nn.ns(i)
		port := fmt.Sprintf("port%d", i+1)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "-n", hub, "link", "set", port, "master", "br0", "up"},
			[]string{"ip", "-n", ns, "addr", "add", nn.Host(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	for i := range nn.n {
		if err := nn.apply(i, nil); err != nil {
			return err
		}
	}
	return nil
}

// apply replaces replica i's ruleset: drop what comes from the given
// replicas.
func (nn *netnsNet) apply(i int, from []int) error {
	rules := "table inet rlchaos {\n chain input {\n  type filter hook input priority 0; policy accept;\n"
	if len(from) > 0 {
		var addrs []string
		for _, f := range from {
			addrs = append(addrs, nn.Host(f))
		}
		rules += "  ip saddr { " + strings.Join(addrs, ", ") + " } drop\n"
	}
	rules += " }\n}\n"
	return runIn("flush ruleset\n"+rules, "ip", "netns", "exec", nn.ns(i), "nft", "-f", "-")
}

func (nn *netnsNet) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nn.ns(i), name}, args...)...)
}

func (nn *netnsNet) Block(from, to int) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if nn.cuts[to] == nil {
		nn.cuts[to] = map[int]bool{}
	}
	nn.cuts[to][from] = true
	var srcs []int
	for f := range nn.cuts[to] {
		srcs = append(srcs, f)
	}
	return nn.apply(to, srcs)
}

func (nn *netnsNet) Heal() error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var first error
	for to := range nn.cuts {
		if err := nn.apply(to, nil); err != nil && first == nil {
			first = err
		}
	}
	nn.cuts = map[int]map[int]bool{}
	return first
}

// Close deletes the namespaces: with them go the bridge, every veth (the
// host's end too) and every rule.
func (nn *netnsNet) Close() error {
	var first error
	for i := range nn.n {
		if err := run("ip", "netns", "del", nn.ns(i)); err != nil && first == nil && !strings.Contains(err.Error(), "No such file") {
			first = err
		}
	}
	if err := run("ip", "netns", "del", nn.hub()); err != nil && first == nil && !strings.Contains(err.Error(), "No such file") {
		first = err
	}
	// The host end vanishes with its peer; remove it if it did not.
	_ = run("ip", "link", "del", nn.rootLink())
	return first
}

// runLock serialises harness runs on this machine (namespaces, ports).
func runLock() (release func(), err error) {
	f, err := os.OpenFile(os.TempDir()+"/raftlock-chaos-proc.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another harness run holds %s", f.Name())
		}
		time.Sleep(500 * time.Millisecond)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
