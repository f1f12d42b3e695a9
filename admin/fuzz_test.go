package admin

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The request-body decoder never panics, and what it accepts is one JSON
// object that fits the body limit, whose keys are the request's field
// names exactly, each once.
func FuzzDecodeBody(f *testing.F) {
	for _, seed := range []string{
		`{"lock":"x","wait":true,"timeout_ms":5000}`, `{"handle":"abc"}`, `{"lock":"x"} {}`, `{"lock":"x","extra":1}`,
		``, `[]`, `null`, `{"lock":` + strings.Repeat(`"`, 10), `{"timeout_ms":1e400}`, "{\"lock\":\"\xff\"}",
		`{"Lock":"x"}`, `{"lock":"x","lock":"y"}`, `{"handle":"a","HANDLE":"b"}`, `{"lock":"x","shared":true,"session":"replica"}`,
		"{\"lock\u0000\":1}", `{"\u006cock":"x"}`,
	} {
		f.Add(seed)
	}
	s := &Server{limits: DefaultLimits()}
	names := map[string][]string{
		"acquire": {"lock", "wait", "timeout_ms", "ttl_ms", "owner", "session", "shared", "limit", "permits"},
		"release": {"handle"},
	}
	f.Fuzz(func(t *testing.T, body string) {
		for kind, v := range map[string]any{"acquire": &AcquireRequest{}, "release": &ReleaseRequest{}} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/", strings.NewReader(body))
			ok := s.decode(rec, req, v)
			switch {
			case ok && int64(len(body)) > s.limits.MaxBodyBytes:
				t.Fatalf("accepted a body of %d bytes (limit %d)", len(body), s.limits.MaxBodyBytes)
			case !ok && rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge:
				t.Fatalf("refused with HTTP %d", rec.Code)
			case !ok:
				continue
			}
			dec := json.NewDecoder(strings.NewReader(body))
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				t.Fatalf("%s: accepted %q, not an object", kind, body)
			}
			seen := map[string]bool{}
			for dec.More() {
				tok, _ := dec.Token()
				key, _ := tok.(string)
				if !slices.Contains(names[kind], key) || seen[key] {
					t.Fatalf("%s: accepted %q with the key %q (known: %v; seen before: %v)", kind, body, key, names[kind], seen[key])
				}
				seen[key] = true
				var skip json.RawMessage
				dec.Decode(&skip)
			}
		}
	})
}

// The listing parameters are integers in range or refused with 400.
func FuzzListParam(f *testing.F) {
	for _, seed := range []string{"", "1", "1000", "1001", "0", "-1", "x", "99999999999999999999", " 5", "5 "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/?limit="+url.QueryEscape(v), nil)
		n, ok := listParam(rec, req, "limit", 10, 1000)
		switch {
		case ok && (n < 1 || n > 1000):
			t.Fatalf("accepted %q as %d", v, n)
		case !ok && rec.Code != http.StatusBadRequest:
			t.Fatalf("refused %q with HTTP %d", v, rec.Code)
		}
	})
}

// The Host and Origin checks never panic, and without configured names a
// Host is answered only when it is an IP address or a localhost name.
func FuzzHostAndOrigin(f *testing.F) {
	for _, seed := range [][2]string{
		{"127.0.0.1:8080", "http://127.0.0.1:8080"}, {"[::1]:80", "null"}, {"evil.example", "http://evil.example"},
		{"localhost.", ""}, {"x.localhost:1", "http://[::1"}, {"[fe80::1%25eth0]:8080", "://"}, {"", "http://"},
	} {
		f.Add(seed[0], seed[1])
	}
	var none hostPolicy
	f.Fuzz(func(t *testing.T, host, origin string) {
		req := httptest.NewRequest("POST", "/", nil)
		req.Host = host
		req.Header.Set("Origin", origin)
		crossSite(req)
		if !none.allows(host) || host == "" {
			return
		}
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
		h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
		if _, err := netip.ParseAddr(h); err != nil && h != "localhost" && !strings.HasSuffix(h, ".localhost") {
			t.Fatalf("Host %q answered without configuration", host)
		}
	})
}
