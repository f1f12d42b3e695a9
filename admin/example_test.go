package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/node"
)

// An application that embeds a raftlock node mounts the admin API on its
// own mux, next to its own routes: the status page at /raftlock/, the API
// at /raftlock/v1/…, the probes at /raftlock/healthz and /raftlock/readyz.
func Example() {
	ctx := context.Background()
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.Bootstrap = "app-1", true, true // a one-node cluster (development)
	cfg.BindAddr = "127.0.0.1:0"
	n, err := node.Start(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close(ctx)

	api, err := admin.New(admin.Config{Node: n, Auth: admin.Auth{Tokens: []admin.Token{
		{Name: "ops", Secret: "a-long-random-secret-from-your-vault", Role: admin.RoleAdmin},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer api.Close(ctx) // before the node's Close

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "the application") })
	api.Mount(mux, "/raftlock")

	srv := httptest.NewServer(mux) // your http.Server (api.ConfigureHTTP sets its timeouts)
	defer srv.Close()

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n.WaitReady(wctx)
	for _, path := range []string{"/raftlock/readyz", "/raftlock/v1/status"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode)
	}
	// Output:
	// /raftlock/readyz 200
	// /raftlock/v1/status 401
}
