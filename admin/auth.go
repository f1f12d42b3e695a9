package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/raftlock/raftlock/internal/textsafe"
)

// Role is what a caller may do. Each role includes the ones before it.
type Role string

// Roles.
const (
	// RoleRead: status, members, locks, sessions, metrics.
	RoleRead Role = "read"
	// RoleLock: RoleRead, and acquire and release locks (non-Go clients).
	RoleLock Role = "lock"
	// RoleAdmin: everything — revoke, end sessions, remove peers, transfer
	// leadership, take and restore snapshots.
	RoleAdmin Role = "admin"
)

func (r Role) rank() int {
	switch r {
	case RoleRead:
		return 1
	case RoleLock:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Token is one bearer token: requests with "Authorization: Bearer
// <Secret>" act as Name with Role.
type Token struct {
	Name   string // who: written to the log with every admin operation
	Secret string // at least 16 bytes
	Role   Role
}

// Auth says who may use the API. Authentication is off only when
// Unauthenticated is set; a zero Auth is refused by New. The probes
// (/healthz, /readyz) and the status page's HTML are public (the page
// holds no data: it reads the API with the token its user gives it).
type Auth struct {
	// Tokens are the bearer tokens accepted.
	Tokens []Token
	// ClientCertRole is the role of a request that arrives over TLS with
	// a verified client certificate (serve with a tls.Config whose
	// ClientAuth is tls.RequireAndVerifyClientCert or
	// VerifyClientCertIfGiven, and whose ClientCAs name who may connect);
	// it acts as "cert:<subject CN>". "": certificates grant nothing.
	ClientCertRole Role
	// Unauthenticated: every request may do everything, as "anonymous".
	// Only for a closed network: a loopback-only development setup, tests,
	// the demo.
	Unauthenticated bool
}

// MinSecretLen is the shortest bearer token secret accepted.
const MinSecretLen = 16

type authenticator struct {
	tokens   map[[32]byte]Token // by SHA-256 of the secret
	certRole Role
	open     bool
}

// compile checks the Auth and indexes its tokens.
func (a Auth) compile() (authenticator, error) {
	out := authenticator{tokens: map[[32]byte]Token{}, certRole: a.ClientCertRole, open: a.Unauthenticated}
	bad := func(format string, args ...any) (authenticator, error) {
		return authenticator{}, fmt.Errorf("%w: auth: "+format, append([]any{errInvalidConfig}, args...)...)
	}
	if !a.Unauthenticated && len(a.Tokens) == 0 && a.ClientCertRole == "" {
		return bad("no tokens and no client-certificate role: set Auth.Unauthenticated to serve without authentication")
	}
	if a.ClientCertRole != "" && a.ClientCertRole.rank() == 0 {
		return bad("client-certificate role %q: want read, lock or admin", a.ClientCertRole)
	}
	for i, t := range a.Tokens {
		switch {
		case t.Name == "" || hasControl(t.Name):
			return bad("token %d: a name is required (without control characters: it is logged and shown)", i)
		case len(t.Secret) < MinSecretLen:
			return bad("token %q: secret of %d bytes (at least %d)", t.Name, len(t.Secret), MinSecretLen)
		case t.Role.rank() == 0:
			return bad("token %q: role %q: want read, lock or admin", t.Name, t.Role)
		}
		h := sha256.Sum256([]byte(t.Secret))
		if _, dup := out.tokens[h]; dup {
			return bad("token %q: the same secret twice", t.Name)
		}
		out.tokens[h] = t
	}
	return out, nil
}

func hasControl(s string) bool { _, _, ok := textsafe.Control(s); return ok }

// Principal is who made a request, as authenticated.
type Principal struct {
	Name string
	Role Role
}

// caller is who made a request: the principal, and the client its quotas
// are counted for (quotaClient).
type caller struct {
	p      Principal
	client string
}

type callerKey struct{}

func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// PrincipalOf returns who made the request (in handlers behind the API's
// authentication); anonymous when authentication is off.
func PrincipalOf(r *http.Request) Principal {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c.p
	}
	return Principal{Name: "anonymous"}
}

// quotaClientOf returns the client r's quotas are counted for (see
// Limits): its principal ("token:<name>", "cert:<CN>"), or without
// authentication its source address.
func quotaClientOf(r *http.Request) string {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok && c.client != "" {
		return c.client
	}
	return addrClient(r.RemoteAddr)
}

var errUnauthorized = errors.New("admin: unauthorized")

// who authenticates r: a bearer token, else a verified client certificate.
// The caller's quota client is its principal — the token ("token:<name>")
// or the certificate ("cert:<CN>") — or, without authentication, its
// source address.
func (a authenticator) who(r *http.Request) (caller, error) {
	if a.open {
		return caller{p: Principal{Name: "anonymous", Role: RoleAdmin}, client: addrClient(r.RemoteAddr)}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		secret, ok := bearer(h)
		if !ok {
			return caller{}, fmt.Errorf("%w: Authorization is not a bearer token", errUnauthorized)
		}
		sum := sha256.Sum256([]byte(secret))
		for k, t := range a.tokens { // constant time in the secret: compare every digest
			if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
				return caller{p: Principal{Name: t.Name, Role: t.Role}, client: "token:" + t.Name}, nil
			}
		}
		return caller{}, fmt.Errorf("%w: unknown bearer token", errUnauthorized)
	}
	if a.certRole != "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		name := "cert:" + r.TLS.VerifiedChains[0][0].Subject.CommonName
		return caller{p: Principal{Name: name, Role: a.certRole}, client: name}, nil
	}
	return caller{}, fmt.Errorf("%w: send \"Authorization: Bearer <token>\"", errUnauthorized)
}

// bearer returns the token of an Authorization header of the Bearer
// scheme: "Bearer <token>", the scheme's name in any case (RFC 7235
// §2.1), one or more spaces before the token.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate answers 401 or 403 and reports false unless r may use a
// route that needs role.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, role Role) (caller, bool) {
	c, err := s.auth.who(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="raftlock"`)
		writeJSON(w, http.StatusUnauthorized, ErrorJSON{Error: ErrKindUnauthorized, Detail: public(err.Error())})
		return c, false
	}
	if c.p.Role.rank() < role.rank() {
		writeJSON(w, http.StatusForbidden, ErrorJSON{Error: ErrKindForbidden,
			Detail: fmt.Sprintf("%s has role %s; this needs %s", c.p.Name, c.p.Role, role)})
		return c, false
	}
	return c, true
}
