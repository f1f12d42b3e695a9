// Package raftmetricstest holds the test of node.EnableRaftMetrics in a test
// binary of its own: the bridge is process-wide (go-metrics is a global), and
// the node package's fake-time tests must not share it.
package raftmetricstest
