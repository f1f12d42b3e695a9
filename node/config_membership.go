package node

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/raftlock/raftlock/internal/gossip"
)

const (
	defaultMaxVoters     = 5
	defaultMaxNonvoters  = 16
	defaultReapTimeout   = 30 * time.Second
	defaultStabilization = 10 * time.Second
)

// GossipTiming tunes the gossip layer's failure detection (SWIM, as in
// hashicorp/memberlist). A member that misses its probes becomes suspect; a
// suspect that does not refute within about SuspicionMult × log10(N+1) ×
// ProbeInterval is declared failed. Every member must use the same timing.
type GossipTiming struct {
	// ProbeInterval: how often a member probes another one.
	ProbeInterval time.Duration
	// ProbeTimeout: how long a probe waits for an ack before asking other
	// members to probe indirectly. Less than ProbeInterval.
	ProbeTimeout time.Duration
	// GossipInterval: how often queued updates are gossiped.
	GossipInterval time.Duration
	// PushPullInterval: how often two members exchange their full state.
	// Failed members are also forgotten by gossip after this long.
	PushPullInterval time.Duration
	// SuspicionMult scales the time a suspect has to refute.
	SuspicionMult int
	// TCPTimeout bounds stream operations (join, push/pull).
	TCPTimeout time.Duration
	// RetryJoinInterval: between join attempts while the node is alone.
	RetryJoinInterval time.Duration
}

// LANGossipTiming is memberlist's LAN profile: a failed member is detected
// within a few seconds.
func LANGossipTiming() GossipTiming {
	return GossipTiming{
		ProbeInterval:     time.Second,
		ProbeTimeout:      500 * time.Millisecond,
		GossipInterval:    200 * time.Millisecond,
		PushPullInterval:  30 * time.Second,
		SuspicionMult:     4,
		TCPTimeout:        10 * time.Second,
		RetryJoinInterval: 5 * time.Second,
	}
}

// gossipOn reports whether the node runs the gossip layer.
func (c *Config) gossipOn() bool { return c.Gossip.Addr != "" || c.hooks.GossipListener != nil }

func (c *Config) maxVoters() int { return c.MaxVoters }

func (c *Config) reapTimeout() time.Duration { return c.ReapTimeout }

func (c *Config) gossipTiming() GossipTiming { return c.Gossip.Timing }

// validateGossip checks the membership settings (messages without the
// ErrInvalidConfig prefix).
func (c *Config) validateGossip() error {
	on := c.gossipOn()
	switch {
	case c.MaxVoters < 0:
		return fmt.Errorf("MaxVoters %d < 0", c.MaxVoters)
	case c.ReapTimeout < 0:
		return fmt.Errorf("ReapTimeout %v < 0", c.ReapTimeout)
	case c.BootstrapExpect < 0:
		return fmt.Errorf("BootstrapExpect %d < 0", c.BootstrapExpect)
	case c.Bootstrap && c.BootstrapExpect > 0:
		return errors.New("Bootstrap and BootstrapExpect are exclusive")
	case len(c.Peers) > 0 && on:
		return errors.New("Peers is for static membership: with gossip, members find each other through Join")
	case c.BootstrapExpect > c.maxVoters():
		return fmt.Errorf("BootstrapExpect %d > MaxVoters %d", c.BootstrapExpect, c.maxVoters())
	case !on && c.BootstrapExpect > 0:
		return errors.New("BootstrapExpect needs Gossip.Addr")
	case !on && len(c.Gossip.Join) > 0:
		return errors.New("Gossip.Join needs Gossip.Addr")
	case !on && len(c.Gossip.Key) > 0:
		return errors.New("Gossip.Key needs Gossip.Addr")
	case !on && c.Gossip.AdvertiseAddr != "":
		return errors.New("Gossip.AdvertiseAddr needs Gossip.Addr")
	case c.Gossip.Addr != "" && c.hooks.GossipListener != nil:
		return errors.New("both Gossip.Addr and a test gossip listener set")
	}
	if n := len(c.Gossip.Key); n != 0 && n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("Gossip.Key is %d bytes; want 16, 24 or 32", n)
	}
	if c.Gossip.Addr != "" {
		if err := gossip.CheckIPPort("Gossip.Addr", c.Gossip.Addr, true, true); err != nil {
			return err
		}
	}
	if c.Gossip.AdvertiseAddr != "" {
		if err := gossip.CheckIPPort("Gossip.AdvertiseAddr", c.Gossip.AdvertiseAddr, false, false); err != nil {
			return err
		}
	}
	for i, s := range c.Gossip.Join {
		host, _, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			return fmt.Errorf("Join[%d] %q is not host:port", i, s)
		}
	}
	if !on {
		return nil
	}
	t := c.gossipTiming()
	switch {
	case t.ProbeInterval <= 0 || t.GossipInterval <= 0 || t.PushPullInterval <= 0 || t.TCPTimeout <= 0 || t.RetryJoinInterval <= 0:
		return fmt.Errorf("Gossip.Timing %+v: every interval and timeout must be > 0", t)
	case t.ProbeTimeout <= 0 || t.ProbeTimeout >= t.ProbeInterval:
		return fmt.Errorf("Gossip.Timing.ProbeTimeout %v outside (0, ProbeInterval %v)", t.ProbeTimeout, t.ProbeInterval)
	case t.SuspicionMult < 1:
		return fmt.Errorf("Gossip.Timing.SuspicionMult %d < 1", t.SuspicionMult)
	}
	return nil
}
