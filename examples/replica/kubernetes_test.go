//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/ports"
)

// What the test reads of examples/deploy/kubernetes/raftlock.yaml. The
// StatefulSet is decoded strictly: a key not declared here is an error, so
// that nothing that changes what a pod runs (envFrom, a preStop hook, a
// working directory, …) is silently ignored. Keys declared as any do not
// change what the processes run or see (scheduling, resources, probes'
// timing).
type k8sStatefulSet struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ServiceName         string `yaml:"serviceName"`
		Replicas            int    `yaml:"replicas"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		MinReadySeconds     any    `yaml:"minReadySeconds"` // rolling updates only
		PVCRetention        struct {
			WhenScaled  string `yaml:"whenScaled"`
			WhenDeleted string `yaml:"whenDeleted"`
		} `yaml:"persistentVolumeClaimRetentionPolicy"`
		Selector any `yaml:"selector"`
		Template struct {
			Metadata any        `yaml:"metadata"`
			Spec     k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec any `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type k8sPodSpec struct {
	TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               any            `yaml:"securityContext"`
	Affinity                      any            `yaml:"affinity"`
	InitContainers                []k8sContainer `yaml:"initContainers"`
	Containers                    []k8sContainer `yaml:"containers"`
	Volumes                       []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName  string `yaml:"secretName"`
			DefaultMode int    `yaml:"defaultMode"`
		} `yaml:"secret"`
		EmptyDir *struct {
			Medium    string `yaml:"medium"`
			SizeLimit string `yaml:"sizeLimit"`
		} `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		Protocol      string `yaml:"protocol"`
	} `yaml:"ports"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	ReadinessProbe *struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
		PeriodSeconds    int `yaml:"periodSeconds"`
		FailureThreshold int `yaml:"failureThreshold"`
	} `yaml:"readinessProbe"`
	LivenessProbe   any `yaml:"livenessProbe"`
	Resources       any `yaml:"resources"`
	SecurityContext any `yaml:"securityContext"`
}

// k8sManifest is the StatefulSet of a manifest and the secrets its header's
// commands create.
type k8sManifest struct {
	sts     k8sStatefulSet
	secrets map[string]map[string][]byte // secret → key → value
}

// readK8sManifest reads the manifest's StatefulSet, and runs the commands
// at the top of the file (`replica certs …`, `kubectl create secret
// generic …`) as an operator would, in dir: the secrets they create are
// the ones the pods get.
func readK8sManifest(t *testing.T, path, dir string) k8sManifest {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := k8sManifest{secrets: map[string]map[string][]byte{}}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	found := 0
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc["kind"] != "StatefulSet" {
			continue
		}
		b, _ := yaml.Marshal(doc)
		if err := yaml.UnmarshalStrict(b, &m.sts); err != nil {
			t.Fatalf("%s: the StatefulSet has a key this test does not read: %v", path, err)
		}
		found++
	}
	if found != 1 {
		t.Fatalf("%s: %d StatefulSets, want one", path, found)
	}
	for _, cmd := range headerCommands(string(raw)) {
		args := shellWords(t, cmd)
		switch {
		case args[0] == "replica":
			runReplicaCommand(t, dir, args[1:], nil)
		case len(args) > 4 && strings.Join(args[:4], " ") == "kubectl create secret generic":
			s := map[string][]byte{}
			for _, a := range args[5:] {
				if kv, ok := strings.CutPrefix(a, "--from-file="); ok {
					k, file, ok := strings.Cut(kv, "=")
					if !ok {
						k, file = filepath.Base(kv), kv
					}
					b, err := os.ReadFile(filepath.Join(dir, file))
					if err != nil {
						t.Fatalf("%s: %s: %v", path, cmd, err)
					}
					s[k] = b
				} else if kv, ok := strings.CutPrefix(a, "--from-literal="); ok {
					k, v, _ := strings.Cut(kv, "=")
					s[k] = []byte(v)
				} else {
					t.Fatalf("%s: %s: argument %q, which this test does not read", path, cmd, a)
				}
			}
			m.secrets[args[4]] = s
		}
	}
	return m
}

// headerCommands returns the shell commands in the comment at the top of a
// manifest (lines "#   replica …" and "#   kubectl …", continued by a
// trailing backslash).
func headerCommands(text string) []string {
	var cmds []string
	cont := false
	for _, line := range strings.Split(text, "\n") {
		c, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		c = strings.TrimSpace(c)
		more := strings.HasSuffix(c, "\\")
		c = strings.TrimSpace(strings.TrimSuffix(c, "\\"))
		switch {
		case cont:
			cmds[len(cmds)-1] += " " + c
		case strings.HasPrefix(c, "replica ") || strings.HasPrefix(c, "kubectl "):
			cmds = append(cmds, c)
		default:
			more = false
		}
		cont = more
	}
	return cmds
}

// randomSubst: the command substitutions the header may use for a random
// secret, and what they print.
var randomSubst = []struct {
	re  *regexp.Regexp
	out func([]byte) string
}{
	{regexp.MustCompile(`^\$\(head -c (\d+) /dev/urandom \| base64\)$`), base64.StdEncoding.EncodeToString},
	{regexp.MustCompile(`^\$\(openssl rand -base64 (\d+)\)$`), base64.StdEncoding.EncodeToString},
	{regexp.MustCompile(`^\$\(openssl rand -hex (\d+)\)$`), hex.EncodeToString},
}

// shellWords splits a command as a shell would (quotes; the random-secret
// command substitutions of randomSubst); anything else a shell would
// expand fails the test.
func shellWords(t *testing.T, cmd string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				t.Fatalf("header command %q: unterminated quote", cmd)
			}
			w.WriteString(cmd[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			j := strings.IndexByte(cmd[i+1:], '"')
			if j < 0 {
				t.Fatalf("header command %q: unterminated quote", cmd)
			}
			q := cmd[i+1 : i+1+j]
			if strings.Contains(q, "$") {
				ok := false
				for _, s := range randomSubst {
					if m := s.re.FindStringSubmatch(q); m != nil {
						n, _ := strconv.Atoi(m[1])
						b := make([]byte, n)
						rand.Read(b)
						q, ok = s.out(b), true
						break
					}
				}
				if !ok {
					t.Fatalf("header command %q: %q is a shell expansion this test does not know", cmd, q)
				}
			}
			w.WriteString(q)
			i, inWord = i+1+j, true
		case c == '$' || c == '`' || c == '|' || c == ';' || c == '&' || c == '>' || c == '<':
			t.Fatalf("header command %q: %q outside quotes, which this test does not run", cmd, c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// k8sVarRef is a Kubernetes dependent-variable reference: $(NAME), or the
// escape $$.
var k8sVarRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// k8sExpand does what Kubernetes does to env values, command and args:
// $(NAME) becomes the variable's value if it is defined, and stays as it is
// otherwise; $$ is a $.
func k8sExpand(s string, vars map[string]string) string {
	return k8sVarRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// k8sNamespace is the namespace the test's pods run in.
const k8sNamespace = "locks"

// k8sCluster runs a manifest's StatefulSet as processes on loopback: each
// pod's init containers to their end, then its replica container. A pod's
// address space (0.0.0.0, its IP, its DNS name under the headless
// Service) becomes loopback ports of its own; its volumes become
// directories: a volumeClaimTemplate one per pod that outlives it, an
// emptyDir one per pod start, a secret one with the secret's keys as files.
type k8sCluster struct {
	t       *testing.T
	m       k8sManifest
	img     dockerfileImage
	dir     string
	token   string               // the admin token, from the replica's environment
	podHost *regexp.Regexp       // a pod's DNS name: <sts>-<n>.<service>.<ns>.svc.cluster.local
	free    []string             // loopback addresses not given out yet
	loop    map[string]string    // "<ordinal>/<port>" → loopback address
	pods    map[int]*replicaProc // the running pods' replica processes
	starts  map[int]int          // pod starts so far, per ordinal
	apis    map[int]api          // the pods' admin APIs
	hc      *http.Client         // with the token
	probe   *http.Client         // without (kubelet's probes)
}

func newK8sCluster(t *testing.T, m k8sManifest, img dockerfileImage, dir string) *k8sCluster {
	t.Helper()
	free, err := ports.Free(3 * 5)
	if err != nil {
		t.Fatal(err)
	}
	c := &k8sCluster{t: t, m: m, img: img, dir: dir, free: free, loop: map[string]string{}, pods: map[int]*replicaProc{},
		starts: map[int]int{}, apis: map[int]api{},
		podHost: regexp.MustCompile(`^` + regexp.QuoteMeta(m.sts.Metadata.Name) + `-(\d+)\.` + regexp.QuoteMeta(m.sts.Spec.ServiceName) +
			`\.` + k8sNamespace + `\.svc\.cluster\.local$`)}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c.probe = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	return c
}

func (c *k8sCluster) podName(ordinal int) string {
	return fmt.Sprintf("%s-%d", c.m.sts.Metadata.Name, ordinal)
}

// podIP is a pod's IP address (a new one at every start, as a new pod gets).
func (c *k8sCluster) podIP(ordinal int) string {
	return fmt.Sprintf("10.244.%d.%d", ordinal, 10+c.starts[ordinal])
}

// loopback is the loopback address of a pod's port.
func (c *k8sCluster) loopback(ordinal int, port string) string {
	key := fmt.Sprint(ordinal, "/", port)
	if _, ok := c.loop[key]; !ok {
		if len(c.free) == 0 {
			c.t.Fatalf("more pod ports than the test picked")
		}
		c.loop[key], c.free = c.free[0], c.free[1:]
	}
	return c.loop[key]
}

// onLoopback maps one value a container gets: each comma-separated
// host:port whose host is 0.0.0.0, a pod's IP or a pod's DNS name becomes
// that pod's loopback port; a path under a mount becomes the volume's
// directory.
func (c *k8sCluster) onLoopback(ordinal int, v string, mounts map[string]string) string {
	items := strings.Split(v, ",")
	for i, item := range items {
		if host, port, err := net.SplitHostPort(item); err == nil {
			if m := c.podHost.FindStringSubmatch(host); m != nil {
				n, _ := strconv.Atoi(m[1])
				items[i] = c.loopback(n, port)
			} else if host == "0.0.0.0" || host == c.podIP(ordinal) {
				items[i] = c.loopback(ordinal, port)
			} else if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() || strings.Contains(host, ".svc.") {
				c.t.Fatalf("pod %d: %q: an address the test cannot map to a pod", ordinal, item)
			}
			continue
		}
		for _, mp := range slices.SortedFunc(func(yield func(string) bool) {
			for k := range mounts {
				if !yield(k) {
					return
				}
			}
		}, func(a, b string) int { return len(b) - len(a) }) {
			if item == mp || strings.HasPrefix(item, mp+"/") {
				items[i] = mounts[mp] + strings.TrimPrefix(item, mp)
				break
			}
		}
	}
	return strings.Join(items, ",")
}

// volumeDirs prepares a pod's volumes for one start: a claim's directory
// persists across starts, an emptyDir is new, a secret's keys are files.
func (c *k8sCluster) volumeDirs(ordinal int) map[string]string {
	t := c.t
	dirs := map[string]string{}
	for _, vct := range c.m.sts.Spec.VolumeClaimTemplates {
		d := filepath.Join(c.dir, "pvc", vct.Metadata.Name+"-"+c.podName(ordinal))
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		dirs[vct.Metadata.Name] = d
	}
	for _, v := range c.m.sts.Spec.Template.Spec.Volumes {
		d := filepath.Join(c.dir, "pods", fmt.Sprintf("%s-start%d", c.podName(ordinal), c.starts[ordinal]), v.Name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		switch {
		case v.Secret != nil:
			s, ok := c.m.secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s: secret %s is not created by the manifest's instructions", v.Name, v.Secret.SecretName)
			}
			for k, b := range s {
				if err := os.WriteFile(filepath.Join(d, k), b, 0o400); err != nil {
					t.Fatal(err)
				}
			}
		case v.EmptyDir != nil:
		default:
			t.Fatalf("volume %s: neither a secret nor an emptyDir", v.Name)
		}
		dirs[v.Name] = d
	}
	return dirs
}

// containerSetup is what a container's process gets: its environment (the
// image's ENV, then the container's env in order) and arguments, on
// loopback.
func (c *k8sCluster) containerSetup(ordinal int, ct k8sContainer, vols map[string]string) (args []string, env map[string]string, mounts map[string]string) {
	t := c.t
	if ct.Image != "raftlock:latest" && !strings.HasPrefix(ct.Image, "raftlock:") {
		t.Fatalf("container %s: image %q, want the replica's image", ct.Name, ct.Image)
	}
	if len(ct.Command) > 0 && !slices.Equal(ct.Command, []string{"/usr/local/bin/replica"}) {
		t.Fatalf("container %s: command %q: only the image's replica runs here", ct.Name, ct.Command)
	}
	mounts = map[string]string{}
	for _, vm := range ct.VolumeMounts {
		d, ok := vols[vm.Name]
		if !ok {
			t.Fatalf("container %s: mount of an unknown volume %s", ct.Name, vm.Name)
		}
		mounts[vm.MountPath] = d
	}
	defined := map[string]string{}
	for _, e := range ct.Env {
		v := k8sExpand(e.Value, defined)
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				v = c.podName(ordinal)
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				v = k8sNamespace
			case f.FieldRef != nil && f.FieldRef.FieldPath == "status.podIP":
				v = c.podIP(ordinal)
			case f.SecretKeyRef != nil:
				b, ok := c.m.secrets[f.SecretKeyRef.Name][f.SecretKeyRef.Key]
				if !ok {
					t.Fatalf("container %s: %s from secret %s key %s, which the manifest's instructions do not create", ct.Name, e.Name, f.SecretKeyRef.Name, f.SecretKeyRef.Key)
				}
				v = string(b)
			default:
				t.Fatalf("container %s: %s: a valueFrom this test does not read", ct.Name, e.Name)
			}
		}
		defined[e.Name] = v
	}
	env = map[string]string{}
	for k, v := range c.img.env {
		env[k] = c.onLoopback(ordinal, v, mounts)
	}
	for k, v := range defined {
		env[k] = c.onLoopback(ordinal, v, mounts)
	}
	for _, a := range ct.Args {
		args = append(args, c.onLoopback(ordinal, k8sExpand(a, defined), mounts))
	}
	return args, env, mounts
}

// start starts a pod: its init containers, each to its end, then its
// replica container (the test's token is the replica's admin token).
func (c *k8sCluster) start(ordinal int) {
	t := c.t
	t.Helper()
	c.starts[ordinal]++
	spec := c.m.sts.Spec.Template.Spec
	vols := c.volumeDirs(ordinal)
	for _, ic := range spec.InitContainers {
		args, env, _ := c.containerSetup(ordinal, ic, vols)
		runReplicaCommand(t, c.dir, args, env)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers in the pod, want the replica", len(spec.Containers))
	}
	ct := spec.Containers[0]
	args, env, mounts := c.containerSetup(ordinal, ct, vols)
	// The replica never holds the key that signs certificates: no file it
	// can read and no variable is a CA key.
	for _, d := range mounts {
		filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
			if b, rerr := os.ReadFile(p); err == nil && !de.IsDir() && rerr == nil {
				for _, s := range c.m.secrets {
					if k := s["ca-key.pem"]; len(k) > 0 && bytes.Equal(b, k) {
						t.Errorf("%s: the replica container can read the CA key at %s", c.podName(ordinal), p)
					}
				}
			}
			return nil
		})
	}
	for k, v := range env {
		if strings.Contains(v, "PRIVATE KEY") {
			t.Errorf("%s: %s holds a private key", c.podName(ordinal), k)
		}
	}
	if c.token == "" {
		c.token = env["RAFTLOCK_ADMIN_TOKEN"]
		c.hc = &http.Client{Transport: bearer{rt: c.probe.Transport, token: c.token}}
	}
	c.pods[ordinal] = startReplica(t, c.podName(ordinal), args, env)
	c.apis[ordinal] = api{t: t, base: "http://" + env["RAFTLOCK_HTTP"], hc: c.hc}
}

// stop stops pods as the kubelet does, all at once (podManagementPolicy
// Parallel): SIGTERM, then SIGKILL once the grace period has passed. Each
// replica must exit 0 within it.
func (c *k8sCluster) stop(ordinals ...int) {
	grace := time.Duration(c.m.sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	if grace == 0 {
		grace = 30 * time.Second // Kubernetes' default
	}
	for _, n := range ordinals {
		c.pods[n].signal(syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, n := range ordinals {
		p := c.pods[n]
		select {
		case <-p.done:
			if p.err != nil {
				c.t.Errorf("%s: SIGTERM: exited with %v", p.id, p.err)
			}
		case <-deadline:
			p.kill()
			c.t.Errorf("%s: still running %v after SIGTERM (the grace period): killed", p.id, grace)
		}
		delete(c.pods, n)
		delete(c.apis, n)
	}
}

// ready is the pod's readiness probe, as the kubelet runs it (no token).
func (c *k8sCluster) ready(ordinal int) bool {
	rp := c.m.sts.Spec.Template.Spec.Containers[0].ReadinessProbe
	port := rp.HTTPGet.Port
	for _, p := range c.m.sts.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == port {
			port = strconv.Itoa(p.ContainerPort)
		}
	}
	resp, err := c.probe.Get("http://" + c.loopback(ordinal, port) + rp.HTTPGet.Path)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// settled reports whether the running pods form one cluster of exactly
// them, all voters: each pod ready by its probe, agreeing on the leader,
// its HTTP session healthy, and the Raft configuration exactly the pods'
// current incarnations.
func (c *k8sCluster) settled() bool {
	var apis []api
	var want []string // the pods' Raft ids
	for n, p := range c.pods {
		select {
		case <-p.done:
			c.t.Fatalf("%s exited: %v", p.id, p.err)
		default:
		}
		st, err := c.apis[n].status()
		if err != nil || !c.ready(n) {
			return false
		}
		apis = append(apis, c.apis[n])
		want = append(want, st.RaftID)
	}
	slices.Sort(want)
	if !healthyVoters(apis, len(want)) {
		return false
	}
	for _, a := range apis {
		st, err := a.status()
		if err != nil {
			return false
		}
		var servers []string
		for _, s := range st.Servers {
			servers = append(servers, s.RaftID)
		}
		slices.Sort(servers)
		if !slices.Equal(servers, want) {
			return false
		}
	}
	return true
}

// waitSettled waits until settled holds; on a timeout it reports what the
// pods' status says (servers, refusals) before failing.
func (c *k8sCluster) waitSettled(timeout time.Duration, what string) {
	c.t.Helper()
	start := time.Now()
	defer func() { c.t.Logf("%s: %v", what, time.Since(start).Round(100*time.Millisecond)) }()
	deadline := start.Add(timeout)
	for !c.settled() {
		if time.Now().After(deadline) {
			for _, n := range slices.Sorted(func(yield func(int) bool) {
				for n := range c.pods {
					if !yield(n) {
						return
					}
				}
			}) {
				st, err := c.apis[n].status()
				c.t.Logf("%s (%s): ready %v err %v leader %q servers %+v", c.podName(n), st.RaftID, st.Ready, err, st.LeaderID, st.Servers)
				for _, r := range st.Refusals {
					c.t.Logf("%s: refused (%s): %s", c.podName(n), r.Reason, r.Detail)
				}
			}
			c.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockThrough takes a lock through a pod's admin API and releases it.
func (c *k8sCluster) lockThrough(ordinal int) {
	c.t.Helper()
	a := c.apis[ordinal]
	var got admin.AcquireResponse
	if code := a.do("POST", "/v1/acquire", map[string]any{"lock": "k8s", "wait": false, "ttl_ms": 10000}, &got); code != 200 || got.Token == 0 {
		c.t.Fatalf("acquire through %s: HTTP %d %+v", c.podName(ordinal), code, got)
	}
	if code := a.do("POST", "/v1/release", map[string]any{"handle": got.Handle}, nil); code != 200 {
		c.t.Errorf("release through %s: HTTP %d", c.podName(ordinal), code)
	}
}

// TestKubernetesScaleAndReplace runs examples/deploy/kubernetes/raftlock.yaml
// without Kubernetes: it creates the secrets with the commands at the top
// of the manifest, then runs each pod of the StatefulSet as processes on
// loopback — its init containers, then the replica — with exactly the
// containers' env and args (Kubernetes' $(VAR) expansion, the pod's fields,
// the secrets; the pod's addresses mapped to loopback ports, its volumes
// to directories), and does what an operator does on day two: three
// founders form a cluster; scaled to five, both new pods become voters and
// grant locks; scaled back to three (pods 4 and 3 stopped as the kubelet
// stops them), three voters remain and grant; pod 1 loses its volume and
// starts again, and rejoins as a new incarnation of its id.
func TestKubernetesScaleAndReplace(t *testing.T) {
	dir := t.TempDir()
	m := readK8sManifest(t, "../deploy/kubernetes/raftlock.yaml", dir)
	if m.sts.Spec.PodManagementPolicy != "Parallel" {
		t.Fatalf("podManagementPolicy %q: the founders must start together (each waits for the others before it is ready)", m.sts.Spec.PodManagementPolicy)
	}
	c := newK8sCluster(t, m, readDockerfile(t, "../deploy/Dockerfile"), dir)
	founders := m.sts.Spec.Replicas
	if founders != 3 {
		t.Fatalf("replicas %d, want 3", founders)
	}
	all := func(from, to int) []int {
		var s []int
		for n := from; n < to; n++ {
			s = append(s, n)
		}
		return s
	}

	for _, n := range all(0, 3) {
		c.start(n)
	}
	c.waitSettled(60*time.Second, "three founders to form a cluster")
	c.lockThrough(0)

	// kubectl scale statefulset raftlock --replicas 5
	for _, n := range all(3, 5) {
		c.start(n)
	}
	c.waitSettled(90*time.Second, "pods 3 and 4 to join as voters")
	for _, n := range all(0, 5) {
		c.lockThrough(n)
	}

	// kubectl scale statefulset raftlock --replicas 3: pods 4 and 3 get
	// SIGTERM together (Parallel), and their claims go with them when the
	// manifest says so.
	c.stop(all(3, 5)...)
	if m.sts.Spec.PVCRetention.WhenScaled == "Delete" {
		for _, n := range all(3, 5) {
			for _, vct := range m.sts.Spec.VolumeClaimTemplates {
				os.RemoveAll(filepath.Join(dir, "pvc", vct.Metadata.Name+"-"+c.podName(n)))
			}
		}
	}
	c.waitSettled(120*time.Second, "three voters after scaling down")
	for _, n := range all(0, 3) {
		c.lockThrough(n)
	}

	// Pod 1's node dies with its volume: a new pod, an empty claim.
	st, err := c.apis[1].status()
	if err != nil {
		t.Fatal(err)
	}
	oldRaftID := st.RaftID
	c.pods[1].kill()
	for _, vct := range m.sts.Spec.VolumeClaimTemplates {
		if err := os.RemoveAll(filepath.Join(dir, "pvc", vct.Metadata.Name+"-"+c.podName(1))); err != nil {
			t.Fatal(err)
		}
	}
	c.start(1)
	c.waitSettled(90*time.Second, "pod 1 to rejoin with a new volume")
	if st, err = c.apis[1].status(); err != nil || st.RaftID == oldRaftID {
		t.Errorf("pod 1 after losing its volume: raft id %q (before %q), %v: want a new incarnation", st.RaftID, oldRaftID, err)
	}
	for _, n := range all(0, 3) {
		c.lockThrough(n)
	}
}
