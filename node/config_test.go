package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/node"
)

func TestConfigValidate(t *testing.T) {
	base := func() node.Config {
		c := node.DefaultConfig()
		c.ID, c.InMemory, c.Bootstrap = "a", true, true
		return c
	}
	if c := base(); c.Validate() != nil {
		t.Fatalf("base config invalid: %v", c.Validate())
	}
	cases := map[string]func(*node.Config){
		"ID":                      func(c *node.Config) { c.ID = "" },
		"DataDir":                 func(c *node.Config) { c.InMemory = false },
		"both DataDir":            func(c *node.Config) { c.DataDir = "/tmp/x" },
		"ID \"a b\"":              func(c *node.Config) { c.ID = "a b" },
		"LeaderLeaseTimeout":      func(c *node.Config) { c.Timing.LeaderLeaseTimeout = 2 * c.Timing.HeartbeatTimeout },
		"CommitTimeout":           func(c *node.Config) { c.Timing.CommitTimeout = 2 * c.Timing.HeartbeatTimeout },
		"ElectionTimeout":         func(c *node.Config) { c.Timing.HeartbeatTimeout = 2 * c.Timing.ElectionTimeout },
		"MaxBatch":                func(c *node.Config) { c.MaxBatch = -1 },
		"LogStore":                func(c *node.Config) { c.LogStore = "sqlite" },
		"one-node static cluster": func(c *node.Config) { c.Bootstrap, c.Gossip.Addr = true, "127.0.0.1:0" }, // Bootstrap without Peers, with gossip
		"InMemory without Bootstrap, Peers or Gossip": func(c *node.Config) { c.Bootstrap = false },
		"does not contain":                            func(c *node.Config) { c.Bootstrap, c.Peers = true, []node.Peer{{ID: "b", Addr: "127.0.0.1:1"}} },
		"duplicate peer ID": func(c *node.Config) {
			c.Peers = []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "a", Addr: "127.0.0.1:2"}}
		},
		"duplicate peer address": func(c *node.Config) {
			c.Peers = []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "b", Addr: "127.0.0.1:1"}}
		},
		"address": func(c *node.Config) { c.Peers = []node.Peer{{ID: "a", Addr: "nonsense"}} },
		"Inbound.MaxHandshakesPerHost 200 exceeds Inbound.MaxHandshakes 128": func(c *node.Config) { c.Inbound.MaxHandshakesPerHost = 200 },
		"Inbound.MemberReserve must not be negative (got -1)":                func(c *node.Config) { c.Inbound.MemberReserve = -1 },
	}
	for want, mutate := range cases {
		c := base()
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
		if _, err := node.Start(context.Background(), c); !errors.Is(err, node.ErrInvalidConfig) {
			t.Errorf("%s: Start accepted an invalid config: %v", want, err)
		}
	}
}

// The one defaulting rule: a zero tunable means its default, whether the
// Config came from DefaultConfig or was built from scratch.
func TestConfigZeroMeansDefault(t *testing.T) {
	scratch := node.Config{ID: "a", InMemory: true, Bootstrap: true}
	if err := scratch.Validate(); err != nil {
		t.Fatalf("a config with only the required fields: %v", err)
	}
	d := node.DefaultConfig()
	d.ID, d.InMemory, d.Bootstrap = "a", true, true
	if got, want := node.WithDefaults(scratch), node.WithDefaults(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults differ:\n%+v\n%+v", got, want)
	}
}

// A configuration the transport refuses (here a plaintext bind other
// machines can reach) is refused by Validate, and by Start before it opens
// the data dir: nothing is written (a replica used to create its Raft
// store and only then fail in the transport).
func TestConfigRefusedBeforeDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := node.DefaultConfig()
	c.ID, c.DataDir, c.BindAddr = "a", dir, "0.0.0.0:0"
	for _, err := range []error{c.Validate(), startErr(c)} {
		if !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), "plaintext bind") {
			t.Errorf("plaintext bind on every interface: %v, want ErrInvalidConfig naming the plaintext bind", err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data dir exists after a refused start: %v", err)
	}
	c.AllowPlaintext = true
	if err := c.Validate(); err != nil {
		t.Errorf("with AllowPlaintext: %v", err)
	}
}

func startErr(c node.Config) error {
	n, err := node.Start(context.Background(), c)
	if err == nil {
		n.Close(context.Background())
	}
	return err
}
