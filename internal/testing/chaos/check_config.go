package chaos

import (
	"fmt"
	"strings"
)

// One cluster identity and one configuration history: every configuration
// any replica held names only members of this cluster; the configuration
// bootstrapped at index 1 is the same wherever it is found (two different
// ones are two clusters: split brain at formation, or a second cluster that
// was merged in); a replica reports one cluster id for its whole life. And
// the membership model of the class: a member that Raft cannot reach never
// becomes a voter; an even number of voters (four or more: two voters
// after a reap may be all a cluster has) does not last.

func serversKey(ss []ConfigServer) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		role := "nonvoter"
		if s.Voter {
			role = "voter"
		}
		parts[i] = s.ID + "@" + s.Addr + "/" + role
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// nodeOfServer is the node id a Raft server id names: a server id is
// "<node id>~<incarnation>" (or the bare node id of a data dir from before
// incarnations). Membership and addresses are judged per node; the
// bootstrap comparison keeps whole server ids, incarnations included.
func nodeOfServer(id string) string {
	if i := strings.IndexByte(id, '~'); i >= 0 {
		return id[:i]
	}
	return id
}

func voters(ss []ConfigServer) int {
	n := 0
	for _, s := range ss {
		if s.Voter {
			n++
		}
	}
	return n
}

func (c *checker) checkConfigs() {
	e := c.h.Expect
	members := map[string]bool{}
	for _, m := range e.Members {
		members[m] = true
	}
	unreachableAt := func(id string, at int64) bool {
		for _, u := range e.Unreachable {
			if u.ID == id && at >= u.From && at <= u.To {
				return true
			}
		}
		return false
	}
	reported := map[string]bool{}
	once := func(key, check, format string, args ...any) {
		if !reported[key] {
			reported[key] = true
			c.fail(check, "", format, args...)
		}
	}
	var boot *ConfigSample
	clusterID := map[string]string{} // node → the id it reported first
	anyID := ""
	even := map[string]*evenRun{}
	cs := sortedConfigs(c.h.Configs)
	// Voter counts are judged on the leader's view where samples say who
	// led (a follower cut off keeps a stale configuration); otherwise on
	// every live sample.
	leaderViews := false
	for i := range cs {
		leaderViews = leaderViews || cs[i].Leader
	}
	c.r.ConfigSamples = len(cs)
	for i := range cs {
		s := &cs[i]
		if len(members) > 0 {
			for _, sv := range s.Servers {
				if !members[nodeOfServer(sv.ID)] {
					once("member/"+s.Node+"/"+sv.ID, CheckClusterIdentity, "%s's configuration (%s, index %d, t=%d) includes %s, which is not a member of this cluster: %s",
						s.Node, s.Source, s.Index, s.At, sv.ID, serversKey(s.Servers))
				}
			}
		}
		for _, sv := range s.Servers {
			if own, ok := e.Addrs[nodeOfServer(sv.ID)]; ok && sv.Addr != own {
				once("addr/"+sv.ID+"/"+sv.Addr, CheckClusterIdentity, "%s's configuration (%s, index %d) has member %s at %s, not at its own address %s: %s",
					s.Node, s.Source, s.Index, sv.ID, sv.Addr, own, serversKey(s.Servers))
			}
			if sv.Voter && unreachableAt(nodeOfServer(sv.ID), s.At) {
				once("unreachable/"+sv.ID, CheckUnreachableVoter, "%s is a voter in %s's configuration (t=%d) although Raft cannot reach it: %s",
					sv.ID, s.Node, s.At, serversKey(s.Servers))
			}
		}
		if s.Source != "live" && s.Index == 1 {
			if boot == nil {
				boot = s
			} else if serversKey(boot.Servers) != serversKey(s.Servers) {
				once("boot/"+serversKey(s.Servers), CheckClusterIdentity, "two bootstrapped configurations: %s on %s and %s on %s",
					serversKey(boot.Servers), boot.Node, serversKey(s.Servers), s.Node)
			}
		}
		if s.ClusterID != "" {
			if first, ok := clusterID[s.Node]; ok && first != s.ClusterID {
				once("id/"+s.Node+"/"+s.ClusterID, CheckClusterIdentity, "%s changed its cluster id from %s to %s (t=%d)", s.Node, first, s.ClusterID, s.At)
			} else if !ok {
				clusterID[s.Node] = s.ClusterID
			}
			if anyID == "" {
				anyID = s.ClusterID
			} else if anyID != s.ClusterID {
				once("ids/"+s.ClusterID, CheckClusterIdentity, "two cluster ids in one cluster: %s and %s (on %s)", anyID, s.ClusterID, s.Node)
			}
		}
		if e.OddVoters && s.Source != "live" {
			// The harness reads a node's data dir when the node stops (and
			// once more after the run): its view ends there. Live samples
			// are taken on change only, so neither the node's last live
			// sample (maybe long before it stopped) nor its next one (after
			// a restart, maybe long after) marks the end.
			c.endEven(s.Node, even[s.Node], min(s.At, c.h.End), once)
			delete(even, s.Node)
		}
		if e.OddVoters && s.Source == "live" && leaderViews && !s.Leader {
			c.endEven(s.Node, even[s.Node], s.At, once) // no longer its leader's view
			delete(even, s.Node)
		}
		if e.OddVoters && s.Source == "live" && (s.Leader || !leaderViews) {
			run := even[s.Node]
			if v := voters(s.Servers); v >= 4 && v%2 == 0 {
				if run == nil || run.key != serversKey(s.Servers) {
					even[s.Node] = &evenRun{since: s.At, key: serversKey(s.Servers)}
				}
			} else {
				c.endEven(s.Node, run, s.At, once)
				delete(even, s.Node)
			}
		}
	}
	for n, run := range even {
		c.endEven(n, run, c.h.End, once) // still held when the workload stopped
	}
}

// evenRun is a configuration with an even number of voters, held since.
type evenRun struct {
	since int64
	key   string
}

// endEven reports an even voter count that lasted longer than allowed.
func (c *checker) endEven(node string, run *evenRun, until int64, once func(key, check, format string, args ...any)) {
	if run == nil || until-run.since <= c.h.Expect.StableFor {
		return
	}
	once("even/"+run.key, CheckOddVoters, "%s held an even number of voters for %s: %s",
		node, durationMS(until-run.since), run.key)
}

// durationMS renders nanoseconds as a rounded duration string.
func durationMS(ns int64) string { return fmt.Sprintf("%d ms", ns/1e6) }
