package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/node"
)

func TestConfigValidate(t *testing.T) {
	base := func() node.Config {
		c := node.DefaultConfig()
		c.ID, c.InMemory = "a", true
		return c
	}
	if c := base(); c.Validate() != nil {
		t.Fatalf("base config invalid: %v", c.Validate())
	}
	cases := map[string]func(*node.Config){
		"ID":                 func(c *node.Config) { c.ID = "" },
		"DataDir":            func(c *node.Config) { c.InMemory = false },
		"both DataDir":       func(c *node.Config) { c.DataDir = "/tmp/x" },
		"BindAddr":           func(c *node.Config) { c.BindAddr = "" },
		"LeaderLeaseTimeout": func(c *node.Config) { c.Timing.LeaderLeaseTimeout = 2 * c.Timing.HeartbeatTimeout },
		"CommitTimeout":      func(c *node.Config) { c.Timing.CommitTimeout = 50 * time.Millisecond },
		"MaxBatch":           func(c *node.Config) { c.MaxBatch = 0 },
		"Bootstrap without":  func(c *node.Config) { c.Bootstrap = true },
		"does not contain":   func(c *node.Config) { c.Bootstrap, c.Peers = true, []node.Peer{{ID: "b", Addr: "127.0.0.1:1"}} },
		"duplicate peer ID": func(c *node.Config) {
			c.Peers = []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "a", Addr: "127.0.0.1:2"}}
		},
		"duplicate peer address": func(c *node.Config) {
			c.Peers = []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "b", Addr: "127.0.0.1:1"}}
		},
		"address": func(c *node.Config) { c.Peers = []node.Peer{{ID: "a", Addr: "nonsense"}} },
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
