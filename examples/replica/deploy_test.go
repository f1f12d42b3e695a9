package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The deployment examples configure the replica with variables it knows,
// and their settings are a valid configuration (examples/deploy: the
// systemd environment file, the StatefulSet's env list with the pod's
// fields filled in).
func TestDeployExamplesConfigure(t *testing.T) {
	known := map[string]bool{}
	for _, v := range envVars {
		known[v] = true
	}
	for _, f := range []string{"../deploy/Dockerfile", "../deploy/compose.yaml", "../deploy/kubernetes/raftlock.yaml", "../deploy/systemd/raftlock.env", "../deploy/systemd/raftlock.service"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range regexp.MustCompile(`RAFTLOCK_[A-Z_]+`).FindAllString(string(b), -1) {
			if !known[v] {
				t.Errorf("%s: %s is no variable of the replica", f, v)
			}
		}
	}

	// systemd: KEY=value lines.
	env := map[string]string{}
	b, _ := os.ReadFile("../deploy/systemd/raftlock.env")
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	c, err := parseConfig(nil, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil || c.ID != "r1" || c.BootstrapExpect != 3 || c.TLSServerName != "raftlock" || c.AdminTokenFile == "" {
		t.Errorf("systemd/raftlock.env: %+v %v", c, err)
	}
	// Gossip advertises an IP literal (a name would be resolved once, at
	// start): the file sets one, as its comment says.
	if host, _, err := net.SplitHostPort(c.GossipAdvertise); err != nil || net.ParseIP(host) == nil {
		t.Errorf("systemd/raftlock.env: RAFTLOCK_GOSSIP_ADVERTISE=%s is no IP literal", c.GossipAdvertise)
	}

	// Kubernetes: the "- {name: X, value: Y}" and "- name: X / value: Y"
	// entries, pod fields filled in
	// (secrets given sample values).
	env = map[string]string{"RAFTLOCK_GOSSIP_KEY": "c2FtcGxlLWtleS1zYW1wbGUta2V5IQ==", "RAFTLOCK_ADMIN_TOKEN": "sample-admin-token-0123456789"}
	pod := strings.NewReplacer("$(POD_NAME)", "raftlock-1", "$(POD_NAMESPACE)", "locks", "$(POD_IP)", "10.1.2.3")
	b, _ = os.ReadFile("../deploy/kubernetes/raftlock.yaml")
	for _, m := range regexp.MustCompile(`- \{name: (RAFTLOCK_[A-Z_]+), value: "?([^"}]*)"?\}`).FindAllStringSubmatch(string(b), -1) {
		env[m[1]] = pod.Replace(m[2])
	}
	for _, m := range regexp.MustCompile(`- name: (RAFTLOCK_[A-Z_]+)\n\s+value: "([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
		env[m[1]] = pod.Replace(m[2])
	}
	c, err = parseConfig(nil, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil || c.ID != "raftlock-1" || c.Advertise != "raftlock-1.raftlock.locks.svc.cluster.local:7400" ||
		c.GossipAdvertise != "10.1.2.3:7401" || strings.Count(c.Join, "svc.cluster.local:7401") != 3 || c.TLSCA == "" {
		t.Errorf("kubernetes/raftlock.yaml: %+v %v", c, err)
	}
}
