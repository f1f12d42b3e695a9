// Package admin is raftlock's HTTP admin API: a handler an application that
// embeds a raftlock node mounts on its own mux, as it would mount
// net/http/pprof. It serves health probes, a JSON API (status, members,
// locks with holders, tokens and waiters, sessions; acquire and release for
// callers that are not written in Go; the operator's admin operations),
// Prometheus metrics and a status page that warns.
//
//	api, err := admin.New(admin.Config{Node: n, Auth: admin.Auth{Tokens: []admin.Token{
//		{Name: "ops", Secret: os.Getenv("RAFTLOCK_ADMIN_TOKEN"), Role: admin.RoleAdmin},
//	}}})
//	api.Mount(mux, "/raftlock") // status page at /raftlock/, API at /raftlock/v1/...
//	defer api.Close(ctx)        // before closing the node
//
// The raftlock command (cmd/raftlock) is a client of this API, and
// examples/replica a program around it.
//
// # Routes
//
// Public (no authentication: for probes and for loading the page, which
// holds no data and asks for a token when the API wants one):
//
//	GET  /healthz                 200 while the process serves
//	GET  /readyz                  200 when a leader is known and this node has caught up, else 503 with reasons
//	GET  /                        the status page
//
// RoleRead:
//
//	GET  /v1/status               ?probe=1 asks every server too; 503 (same body) while not ready
//	GET  /v1/members              every member, with what each server says of itself (?probe=0: gossip only)
//	GET  /v1/locks                ?prefix=&after=&limit=&waiters=&sync=1&stale=1
//	GET  /v1/locks/{name}         ?waiters=&after=&shared_after=&sync=1&stale=1
//	GET  /v1/sessions             ?after=&limit=&sync=1&stale=1
//	GET  /v1/whoami
//	GET  /metrics                 (with Config.Gatherer; without one: 501 not_configured)
//
// RoleLock (and read):
//
//	POST /v1/acquire              {"lock":"x","wait":true,"timeout_ms":5000,"ttl_ms":10000,"owner":"job 7"}
//	                              a read lock: {"lock":"x","shared":true,...}
//	                              a semaphore: {"lock":"pool","limit":4,"permits":1,...}
//	                              in the replica's session: {"lock":"x","session":"replica",...}
//	                              a client-kept lease's lock-delay: {...,"lock_delay_ms":2000}
//	POST /v1/release              {"handle":"..."}
//	GET  /v1/lease                ?handle=           (renews a client-kept lease)
//	GET  /v1/lease/wait           ?handle=&timeout_ms= (answers when the lease ends or the wait does; renews too)
//
// RoleAdmin (everything):
//
//	POST /v1/admin/revoke               {"lock":"x","token":17,"why":"holder stuck"}
//	POST /v1/admin/end-session          {"session":42,"why":"runaway client"}
//	POST /v1/admin/remove-peer          {"node_id":"r3"}        (dead peers only, guarded like reaping)
//	POST /v1/admin/transfer-leadership  {"to":"r2"}             ("" lets Raft pick)
//	GET  /v1/admin/snapshot             a backup of the lock table (octet-stream)
//	POST /v1/admin/snapshot             restore one (see node.Operator.Restore)
//
// # Leases
//
// A lease acquired over HTTP is client-kept unless asked otherwise: it has
// a session of its own, of TTL ttl_ms (default Config.TTL, 10 s unless
// set), and its client keeps it by asking about it at least once per TTL —
// GET /v1/lease every third of the TTL, say, or GET /v1/lease/wait again
// each time it answers (for a client-kept lease it answers within half the
// TTL) — until it releases it with POST /v1/release. Every answer says how
// long the lease stays valid at least (valid_for_ms, counted from when the
// answer was sent). A client that stops asking — it crashed, hangs, or lost
// the network — loses the lock a TTL after its last question: the server
// releases it as an expiry would, and the lock stays ungranted for the
// lock-delay. "session":"replica" puts the lease in the server's one shared
// session instead, where it is held until released, or until the replica
// stops or is cut off from the cluster: for holders that cannot renew, not
// for a script that may die holding it. A session never waits for a grant
// it holds itself (lockapi.ErrAlreadyHeld): in the shared session a waiting
// acquire of a name it holds for another client waits at the replica until
// that lease ends, and a try answers 409 locked.
//
// Every answer is JSON (the snapshot excepted), errors included: unknown
// paths are 404 and wrong methods 405 with {"error":"not_found"} or
// {"error":"method_not_allowed"}; the kinds are the ErrKind constants.
// Request bodies are strict: Content-Type application/json (a restore:
// application/octet-stream; else 415 bad_request), one JSON object whose
// keys are the request's field names exactly — case-sensitive, each at
// most once — and nothing after it (anything else is 400 bad_request).
// Error details
// never carry the library's package prefixes.
//
// Listings come in pages of at most 1,000 (and at most the Limits): a page
// of /v1/locks or /v1/sessions names the next one in "next" (pass it as
// ?after=; absent on the last page); one lock's waiters and shared grants
// page with "waiters_next" and "shared_next" (?after= and ?shared_after=),
// and each lock of /v1/locks lists at most its first 8 of each (with
// waiter_count and shared_count). Pages are read from the node's lock
// table a page at a time: a listing never holds up the state machine for
// more than its page. At most half the CPUs' worth of listings (at least
// one) are served at a time, first come first served; the others wait
// their turn while their request lasts (503 not_ready if it ends first),
// so that clients listing back to back cannot take every CPU from Raft
// and the keepalives. An item that exists from the first page to the last
// is listed once (a waiter at least once), in order; items added or
// removed meanwhile may be listed or not (fsm.FSM.Locks).
//
// A read of the lock table on a node that is not ready (in no cluster, no
// leader known, not caught up) is 503 not_ready — the answer is unknown —
// unless the caller asks for the stale local view with ?stale=1.
//
// # Authentication
//
// Config.Auth is required: bearer tokens (Token: name, secret, role; sent
// as "Authorization: Bearer <secret>", the scheme in any case),
// and/or mutual TLS (Auth.ClientCertRole: the role of any verified client
// certificate; the http.Server's tls.Config must verify them). Without
// either, New fails unless Auth.Unauthenticated says so explicitly. Every
// admin operation is logged with the caller's name, and a revocation
// carries it into the Raft log.
//
// # Browsers
//
// A web page the operator opens can make the browser call the API: with a
// client certificate the browser attaches by itself, or with no
// credentials at all when authentication is off. The API serves tools and
// its own status page, so on every API route it refuses (403 forbidden) a
// request that Sec-Fetch-Site or Origin says another site caused, and with
// authentication off one whose Host is not an IP address, localhost,
// *.localhost or one of Config.AllowedHosts (a page can rebind its own
// name to this machine's address); and it answers a body only in the
// media types above, which no page can send without a CORS preflight, and
// the API approves none.
//
// # Limits
//
// Limits bound what HTTP clients can make the server hold: connections in
// all and per source address, connection and request timeouts
// (ConfigureHTTP), body and header sizes, acquisitions and long polls per
// client (a principal: a token or a client certificate, else the source
// address) and in all, the longest wait, the size of listings, the size of
// a backup.
// Every call that cannot commit answers 503 no_quorum within its deadline
// (a TryLock within a few election timeouts, the opening of the HTTP
// session included).
package admin
