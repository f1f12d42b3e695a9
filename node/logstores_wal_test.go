//go:build raftwal

package node_test

import "github.com/raftlock/raftlock/node"

// logStores are the log stores in this build (build tag raftwal: both).
var logStores = []node.LogStore{node.LogStoreBolt, node.LogStoreWAL}
