package node

import "strings"

// notReadyReason says, from its Status, why a node whose Ready channel is
// not closed is not ready (WaitReady's error when its context ends): in no
// cluster yet (with what formation waits for), no leader known, or
// catching up with the log; and the gossip error, if any — for a node whose
// seeds are all gone, "no seed reachable" and the seeds it tried.
func notReadyReason(st Status) string {
	var why []string
	switch {
	case len(st.Servers) == 0:
		r := "in no cluster yet"
		if st.Formation != "" {
			r += ": " + st.Formation
		}
		why = append(why, r)
	case st.LeaderID == "":
		why = append(why, "no leader known (an election, or no quorum)")
	default:
		why = append(why, "catching up with the leader's log")
	}
	if st.JoinErr != "" {
		why = append(why, "join: "+st.JoinErr)
	}
	if st.GossipErr != "" {
		why = append(why, "gossip: "+st.GossipErr)
	}
	return strings.Join(why, "; ")
}
