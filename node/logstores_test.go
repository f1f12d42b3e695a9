//go:build !raftwal

package node_test

import "github.com/raftlock/raftlock/node"

// logStores are the log stores in this build: the WAL needs the build tag
// raftwal (Config.LogStore).
var logStores = []node.LogStore{node.LogStoreBolt}
