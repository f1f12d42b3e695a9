package admin

import (
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Config.Validate needs no node: a program checks its API settings before
// it starts the node (examples/replica does), and refuses what New would.
func TestConfigValidateWithoutNode(t *testing.T) {
	good := Config{Auth: Auth{Tokens: []Token{{Name: "a", Secret: adminSecret, Role: RoleAdmin}}}}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"zero auth":          func(c *Config) { c.Auth = Auth{} },
		"short secret":       func(c *Config) { c.Auth.Tokens[0].Secret = "short" },
		"no role":            func(c *Config) { c.Auth.Tokens[0].Role = "" },
		"bad cert role":      func(c *Config) { c.Auth.ClientCertRole = "root" },
		"a URL as a host":    func(c *Config) { c.AllowedHosts = []string{"http://raftlock.internal"} },
		"negative TTL":       func(c *Config) { c.TTL = -time.Second },
		"TTL over the max":   func(c *Config) { c.TTL = fsmwire.MaxTTL + time.Second },
		"negative LockDelay": func(c *Config) { c.LockDelay = -time.Second },
		"LockDelay over max": func(c *Config) { c.LockDelay = fsmwire.MaxLockDelay + time.Second },
		"negative limit":     func(c *Config) { c.Limits.MaxBodyBytes = -1 },
	} {
		c := good
		c.Auth.Tokens = append([]Token(nil), good.Auth.Tokens...)
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
		if _, err := New(c); err == nil {
			t.Errorf("%s: New without a node accepted it", name)
		}
	}
}
