package readmetest

import (
	"os/exec"
	"strings"
	"testing"
)

// The test machinery under internal/testing is imported by tests, the
// chaos harness, the bench and the example programs that start replica
// processes — never by what an application links: the public packages, the
// shipped internal packages, the replica and the raftlock command.
func TestShippedCodeImportsNoTestMachinery(t *testing.T) {
	shipped := []string{"./node/...", "./lockapi/...", "./admin", "./fsm/...", "./transport/...", "./fence",
		"./cmd/raftlock", "./examples/replica"}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", repoRoot+"/internal/...").Output()
	if err != nil {
		t.Fatalf("go list internal: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.Contains(p, "/internal/testing/") {
			shipped = append(shipped, p)
		}
	}
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, shipped...)
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	deps, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, line := range strings.Split(string(deps), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.Contains(f[0], "/internal/testing/") {
			continue
		}
		for _, imp := range f[1:] {
			if strings.Contains(imp, "github.com/raftlock/raftlock/internal/testing/") {
				t.Errorf("%s imports the test machinery %s", f[0], imp)
			}
		}
	}
}
