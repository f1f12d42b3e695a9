// Package fencetest runs raftlock's fences against real PostgreSQL, MariaDB
// and Redis servers. It is a separate module so that the database clients
// it needs stay out of raftlock's own go.mod.
package fencetest
