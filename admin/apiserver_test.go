package admin

import (
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/node"
)

// testLimits are the limits a test sets (zero: the default).
type testLimits struct {
	readHeader, read, write, idle time.Duration
	inFlightPerClient             int
	heldPerClient                 int
}

// newAPI returns a Server on n with the test's limits, closed at the end.
func newAPI(t *testing.T, n *node.Node, tl testLimits) *Server {
	t.Helper()
	api, err := New(Config{Node: n, TTL: time.Second, Auth: Auth{Unauthenticated: true}, Limits: Limits{
		ReadHeaderTimeout: tl.readHeader, ReadTimeout: tl.read, WriteTimeout: tl.write, IdleTimeout: tl.idle,
		MaxInFlightPerClient: tl.inFlightPerClient, MaxHeldPerClient: tl.heldPerClient,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// httpServer returns the http.Server that serves api, set up as the replica
// program sets it up.
func httpServer(api *Server) *http.Server {
	srv := &http.Server{Handler: api.Handler()}
	api.ConfigureHTTP(srv)
	return srv
}
