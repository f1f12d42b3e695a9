package admin

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// What a browser can be made to send by a page of another site, and how
// the API tells (Server.guard):
//
//   - Without asking the server first, a page can make the browser send a
//     GET, and a POST whose Content-Type is text/plain,
//     application/x-www-form-urlencoded or multipart/form-data (a form,
//     sendBeacon, a no-cors fetch) or that has none. Any other Content-Type
//     — application/json, application/octet-stream — is not a CORS-safelisted
//     value, so the browser first asks with a preflight, which this API never
//     approves (OPTIONS is 405; no answer carries Access-Control-* headers).
//     So every request with a body must say application/json (a restore:
//     application/octet-stream): the non-simple header is the proof that no
//     cross-site page sent it.
//   - A browser names where a request comes from: Sec-Fetch-Site (every
//     current browser) and Origin (on every POST). A request another site
//     caused (Sec-Fetch-Site cross-site or same-site, or an Origin whose host
//     is not the request's Host) is refused on every API route, reads
//     included: the API serves scripts and tools, which send neither header,
//     and the status page, which is same-origin. Same-site is refused too:
//     another port of localhost is same-site.
//   - A page that rebinds its own name to this machine's address (DNS
//     rebinding) is same-origin with the API; only the Host header it sends,
//     its own name, gives it away. Without authentication the API answers
//     only Host names no attacker can point at it: IP addresses, localhost
//     and *.localhost (RFC 6761: browsers resolve them to loopback
//     themselves), and Config.AllowedHosts. With authentication the rebound
//     page has no credentials to send (a TLS client certificate fails the
//     name check of the server's certificate first).
//
// The probes and the status page's HTML are public and hold no data: no
// check applies to them.

// hostPolicy is which Host names an unauthenticated API answers (see
// Config.AllowedHosts).
type hostPolicy struct {
	any      bool            // "*": every Host
	exact    map[string]bool // lower case, no trailing dot
	suffixes []string        // ".ops.example" for "*.ops.example"
}

// errBadHost: an entry of Config.AllowedHosts is not a host name.
var errBadHost = errors.New("not a host name")

// compileHosts checks and indexes Config.AllowedHosts.
func compileHosts(list []string) (hostPolicy, error) {
	p := hostPolicy{exact: map[string]bool{}}
	for _, h := range list {
		if h == "*" {
			p.any = true
			continue
		}
		name, wild := strings.CutPrefix(strings.ToLower(strings.TrimSuffix(h, ".")), "*.")
		if !validHostName(name) {
			return hostPolicy{}, fmt.Errorf("%w: AllowedHosts entry %q: %w (want a name such as raftlock.internal or *.ops.example, without scheme or port)", errInvalidConfig, h, errBadHost)
		}
		if wild {
			p.suffixes = append(p.suffixes, "."+name)
		} else {
			p.exact[name] = true
		}
	}
	return p, nil
}

// validHostName reports whether s is a DNS name: dot-separated labels of
// letters, digits, '-' and '_', 1 to 63 bytes each, 253 in all.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allows reports whether an unauthenticated API answers a request with
// this Host header (port ignored; "" — a request without one — is not a
// browser's).
func (p hostPolicy) allows(hostport string) bool {
	if p.any || hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "."))
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || p.exact[host] {
		return true
	}
	for _, suf := range p.suffixes {
		if strings.HasSuffix(host, suf) {
			return true
		}
	}
	return false
}

// crossSite returns why r was sent by a browser for a page of another
// origin, or "" (same origin, typed by the user, or not a browser). The
// rules of net/http.CrossOriginProtection, for every method.
func crossSite(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return ""
	case "":
	default:
		return "Sec-Fetch-Site: " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return ""
	}
	return "Origin " + origin + " is not " + r.Host
}

// Media types of request bodies.
const (
	bodyJSON   = "application/json"
	bodyBackup = "application/octet-stream"
)

// hasMediaType reports whether r's Content-Type is want (parameters such
// as a charset allowed).
func hasMediaType(r *http.Request, want string) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == want
}

// guard answers 403 or 415 and reports false for a request to an API route
// that a page of another site could have made a browser send (see above);
// body is the media type the route's body must have ("" none).
func (s *Server) guard(w http.ResponseWriter, r *http.Request, body string) bool {
	if s.auth.open && !s.hosts.allows(r.Host) {
		writeJSON(w, http.StatusForbidden, ErrorJSON{Error: ErrKindForbidden,
			Detail: fmt.Sprintf("Host %q: without authentication this server answers only IP addresses, localhost names and Config.AllowedHosts (a page can rebind its own name to this address)", r.Host)})
		return false
	}
	if why := crossSite(r); why != "" {
		writeJSON(w, http.StatusForbidden, ErrorJSON{Error: ErrKindForbidden,
			Detail: "cross-origin browser request refused (" + why + "): the API serves tools and its own status page"})
		return false
	}
	if body != "" && !hasMediaType(r, body) {
		writeJSON(w, http.StatusUnsupportedMediaType, ErrorJSON{Error: ErrKindBadRequest,
			Detail: fmt.Sprintf("Content-Type %q: send %q", r.Header.Get("Content-Type"), body)})
		return false
	}
	return true
}
