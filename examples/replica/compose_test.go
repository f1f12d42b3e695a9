//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/ports"
)

// composeService is what the test reads of a service of
// examples/deploy/compose.yaml.
type composeService struct {
	Build       any               `yaml:"build"`
	Image       string            `yaml:"image"`
	Environment map[string]string `yaml:"environment"`
	Networks    map[string]struct {
		IPv4 string `yaml:"ipv4_address"`
	} `yaml:"networks"`
	Ports   []string `yaml:"ports"`
	Volumes []string `yaml:"volumes"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Networks map[string]struct {
		Internal bool `yaml:"internal"`
	} `yaml:"networks"`
}

// composeVar matches compose's interpolations: ${NAME}, ${NAME:-default},
// ${NAME-default}, ${NAME:?error}, ${NAME?error}.
var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate does what docker compose does to the file's text with the
// shell environment env; a required variable that is unset is an error.
func interpolate(text string, env map[string]string) (string, error) {
	var err error
	out := composeVar.ReplaceAllStringFunc(text, func(m string) string {
		p := composeVar.FindStringSubmatch(m)
		v, set := env[p[1]]
		empty := !set || (strings.HasPrefix(p[2], ":") && v == "")
		switch strings.TrimPrefix(p[2], ":") {
		case "-":
			if empty {
				return p[3]
			}
		case "?":
			if empty {
				err = fmt.Errorf("required variable %s is missing: %s", p[1], p[3])
			}
		}
		return v
	})
	return out, err
}

// dockerfileImage is what the test reads of the Dockerfile's final stage.
type dockerfileImage struct {
	env        map[string]string
	user       string
	entrypoint string
	chowned    map[string]string // COPY --chown=OWNER ... DEST: DEST → OWNER
}

func readDockerfile(t *testing.T, path string) dockerfileImage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	img := dockerfileImage{env: map[string]string{}, chowned: map[string]string{}}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM": // a new stage: only the last one is the image
			img = dockerfileImage{env: map[string]string{}, chowned: map[string]string{}}
		case "ENV":
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("%s: ENV %q: only KEY=VALUE is read here", path, kv)
				}
				img.env[k] = v
			}
		case "USER":
			img.user = f[1]
		case "ENTRYPOINT":
			img.entrypoint = strings.Join(f[1:], " ")
		case "COPY":
			for _, a := range f[1:] {
				if owner, ok := strings.CutPrefix(a, "--chown="); ok {
					img.chowned[f[len(f)-1]] = owner
				}
			}
		}
	}
	return img
}

// TestComposeClusterFormsAndGrants runs examples/deploy/compose.yaml
// without Docker: it reads the file (interpolated as docker compose does)
// and the Dockerfile's image (its ENV, USER, the owner of the data dir),
// checks each replica's environment as the container gets it (the image's
// ENV overridden by the service's environment) is a valid configuration —
// plaintext on the private network included — and then starts one replica
// process per service with exactly that environment, its addresses mapped
// to loopback ports (each container's address space becomes loopback, its
// volume a directory), and checks that they form one cluster and grant a
// lock, which another replica then sees held.
func TestComposeClusterFormsAndGrants(t *testing.T) {
	const token = "compose-test-token-0123456789"
	raw, err := os.ReadFile("../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := interpolate(string(raw), nil); err == nil || !strings.Contains(err.Error(), "RAFTLOCK_ADMIN_TOKEN") {
		t.Errorf("compose without RAFTLOCK_ADMIN_TOKEN in the shell: %v, want it refused by name", err)
	}
	text, err := interpolate(string(raw), map[string]string{"RAFTLOCK_ADMIN_TOKEN": token})
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal([]byte(text), &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	// A service key the test does not read could change what the
	// container runs (env_file, command, user, …): refuse it here rather
	// than ignore it.
	var keys struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(text), &keys); err != nil {
		t.Fatal(err)
	}
	for name, svc := range keys.Services {
		for k := range svc {
			if !slices.Contains([]string{"image", "build", "restart", "stop_grace_period", "environment", "networks", "ports", "volumes"}, k) {
				t.Errorf("compose.yaml: service %s: key %q, which this test does not read", name, k)
			}
		}
	}
	img := readDockerfile(t, "../deploy/Dockerfile")
	if img.entrypoint != `["/usr/local/bin/replica"]` || img.user == "" || img.user == "root" || strings.HasPrefix(img.user, "0") {
		t.Fatalf("Dockerfile: entrypoint %s, user %q: want the replica as a non-root user", img.entrypoint, img.user)
	}
	dataDir := img.env["RAFTLOCK_DATA_DIR"]
	if owner := img.chowned[dataDir]; dataDir == "" || owner != img.user {
		t.Errorf("Dockerfile: the data dir %q belongs to %q, not to the user %q the replica runs as (a volume mounted there starts with that owner)", dataDir, owner, img.user)
	}

	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cf.Services {
			if !yield(n) {
				return
			}
		}
	})
	if len(names) != 3 {
		t.Fatalf("compose.yaml: services %v, want three replicas", names)
	}
	free, err := ports.Free(4 * len(names))
	if err != nil {
		t.Fatal(err)
	}
	loop := map[string]string{} // a container's "ip:port" (or "service/ip:port" for an unspecified ip) → loopback
	mapAddr := func(service, v string) string {
		host, _, err := net.SplitHostPort(v)
		ip := net.ParseIP(host)
		if err != nil || ip == nil {
			return v
		}
		key := v
		if ip.IsUnspecified() {
			key = service + "/" + v
		}
		if _, ok := loop[key]; !ok {
			loop[key], free = free[0], free[1:]
		}
		return loop[key]
	}
	dir := t.TempDir()
	type replicaSetup struct {
		name string
		env  map[string]string
		http string // loopback
	}
	var setups []replicaSetup
	for _, name := range names {
		s := cf.Services[name]
		if s.Build == nil && s.Image == "" {
			t.Fatalf("%s: neither build nor image", name)
		}
		env := map[string]string{}
		for k, v := range img.env {
			env[k] = v
		}
		for k, v := range s.Environment {
			env[k] = v
		}
		// As the container sees it: a valid configuration, checked whole
		// (plaintext on a non-loopback address needs -allow-plaintext).
		c, err := parseConfig(nil, envOf(env), &bytes.Buffer{})
		if err == nil {
			_, err = c.prepare()
		}
		if err != nil {
			t.Fatalf("%s: the container's configuration is refused: %v", name, err)
		}
		// Raft and gossip bind to the address on an internal network.
		for _, k := range []string{"RAFTLOCK_BIND", "RAFTLOCK_GOSSIP"} {
			host, _, _ := net.SplitHostPort(env[k])
			ok := false
			for nw, n := range s.Networks {
				ok = ok || (n.IPv4 == host && cf.Networks[nw].Internal)
			}
			if !ok {
				t.Errorf("%s: %s=%s is not the service's address on an internal network (networks %+v)", name, k, env[k], s.Networks)
			}
		}
		// The data dir is a volume; the HTTP port is published on the
		// host's loopback.
		volume := ""
		for _, v := range s.Volumes {
			if src, target, _ := strings.Cut(v, ":"); target == env["RAFTLOCK_DATA_DIR"] {
				volume = src
			}
		}
		if volume == "" {
			t.Errorf("%s: RAFTLOCK_DATA_DIR %s is no volume (%v)", name, env["RAFTLOCK_DATA_DIR"], s.Volumes)
		}
		_, httpPort, _ := net.SplitHostPort(env["RAFTLOCK_HTTP"])
		if len(s.Ports) != 1 || !strings.HasPrefix(s.Ports[0], "127.0.0.1:") || !strings.HasSuffix(s.Ports[0], ":"+httpPort) {
			t.Errorf("%s: ports %v: want the HTTP port %s published on the host's loopback only", name, s.Ports, httpPort)
		}
		// On loopback.
		for k, v := range env {
			var items []string
			for _, item := range strings.Split(v, ",") {
				items = append(items, mapAddr(name, item))
			}
			env[k] = strings.Join(items, ",")
		}
		env["RAFTLOCK_DATA_DIR"] = filepath.Join(dir, volume)
		setups = append(setups, replicaSetup{name: name, env: env, http: env["RAFTLOCK_HTTP"]})
	}
	if t.Failed() {
		t.FailNow()
	}

	var apis []api
	for _, s := range setups {
		startReplica(t, s.name, nil, s.env)
		hc := &http.Client{Transport: bearer{rt: http.DefaultTransport, token: token}}
		t.Cleanup(hc.CloseIdleConnections)
		apis = append(apis, api{t: t, base: "http://" + s.http, hc: hc})
	}
	waitUntil(t, 60*time.Second, "one cluster of the three compose replicas", func() bool { return healthy(apis) })

	var got admin.AcquireResponse
	if code := apis[0].do("POST", "/v1/acquire", map[string]any{"lock": "compose", "wait": false, "ttl_ms": 10000}, &got); code != 200 || got.Token == 0 {
		t.Fatalf("acquire through %s: HTTP %d %+v", setups[0].name, code, got)
	}
	var e admin.ErrorJSON
	if code := apis[2].do("POST", "/v1/acquire", map[string]any{"lock": "compose", "wait": false, "ttl_ms": 10000}, &e); code != 409 || e.Holder == nil || e.Holder.Token != got.Token {
		t.Errorf("acquire of the held lock through %s: HTTP %d %+v, want 409 locked by token %d", setups[2].name, code, e, got.Token)
	}
	if code := apis[0].do("POST", "/v1/release", map[string]any{"handle": got.Handle}, nil); code != 200 {
		t.Errorf("release: HTTP %d", code)
	}
}
