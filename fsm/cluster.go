package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// setClusterVersion raises the cluster version (see SetClusterVersion). A
// version beyond MaxClusterVersion never gets here: the entry halts the
// state machine before it is applied.
func (a *applier) setClusterVersion(v uint64) Result {
	st := a.st
	switch {
	case v < st.version:
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("cluster version %d would lower %d", v, st.version)}
	case v == st.version:
		return Result{Status: fsmwire.StatusOK}
	}
	if st.version < versionExactlyOnce && v >= versionExactlyOnce {
		st.upgradeDelays()
	}
	st.version = v
	a.emit(Event{Kind: fsmwire.EventClusterChanged})
	return Result{Status: fsmwire.StatusOK}
}

// initCluster records the cluster id once.
func (a *applier) initCluster(id string) Result {
	st := a.st
	switch st.clusterID {
	case id:
		return Result{Status: fsmwire.StatusOK}
	case "":
		st.clusterID = id
		a.emit(Event{Kind: fsmwire.EventClusterChanged})
		return Result{Status: fsmwire.StatusOK}
	}
	return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("the cluster id is %q, not %q", st.clusterID, id)}
}
