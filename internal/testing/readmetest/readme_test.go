package readmetest

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// blocks returns the ```go blocks of a Markdown file with their line.
func blocks(md string) (codes []string, lines []int) {
	var cur []string
	in, start := false, 0
	for i, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in, start, cur = true, i+2, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			codes, lines = append(codes, strings.Join(cur, "\n")), append(lines, start)
		case in:
			cur = append(cur, l)
		}
	}
	return codes, lines
}

var importBlock = regexp.MustCompile(`(?s)^\s*import\s*(?:\((.*?)\)|("[^"\n]+"))\s*\n`)

// stdPackages a fragment may use without importing them.
var stdPackages = map[string]string{
	"context": "context", "time": "time", "sql": "database/sql", "tls": "crypto/tls", "fmt": "fmt",
	"errors": "errors", "log": "log", "os": "os", "http": "net/http", "slog": "log/slog",
}

// fragmentFile turns a fragment into a Go file of package readme.
func fragmentFile(code string, n int) string {
	imports := map[string]bool{}
	if m := importBlock.FindStringSubmatch(code); m != nil {
		for _, l := range strings.Split(m[1]+"\n"+m[2], "\n") {
			if l = strings.TrimSpace(l); l != "" {
				imports[l] = true
			}
		}
		code = code[len(m[0]):]
	}
	for name, path := range stdPackages {
		if regexp.MustCompile(`\b` + name + `\.[A-Z]`).MatchString(code) {
			imports[`"`+path+`"`] = true
		}
	}
	var b strings.Builder
	b.WriteString("package readme\n\nimport (\n")
	for imp := range imports {
		b.WriteString("\t" + imp + "\n")
	}
	body := strings.TrimRight(code, " \t\n")
	if !endsWithReturn(body) {
		body += "\nreturn nil"
	}
	fmt.Fprintf(&b, ")\n\nfunc fragment%d() error {\n%s\n}\n", n, body)
	return b.String()
}

// endsWithReturn reports whether the statements of body end with a return
// statement (false if they do not parse: the compiler then says why).
func endsWithReturn(body string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc f() error {\n"+body+"\n}\n", 0)
	if err != nil || len(f.Decls) != 1 {
		return false
	}
	list := f.Decls[0].(*ast.FuncDecl).Body.List
	if len(list) == 0 {
		return false
	}
	_, ok := list[len(list)-1].(*ast.ReturnStmt)
	return ok
}

const preamble = `package readme

import (
	"context"
	"crypto/tls"
	"database/sql"
	"net/http"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// Names a README fragment may use without declaring them.
var (
	ctx        context.Context
	mtlsConfig *tls.Config
	key        []byte
	db         *sql.DB
	n          *node.Node     // a started node
	mux        *http.ServeMux // the application's mux
)

func runReport(context.Context, lockapi.Token) error { return nil }
`

// compileMarkdown compiles the Go blocks of the Markdown files at paths
// and returns what the compiler said ("" if they compile). Each file's
// blocks form packages of their own (fragments of one file may continue
// each other, never another file's), all checked by one go vet.
func compileMarkdown(t *testing.T, paths ...string) string {
	t.Helper()
	// A directory inside the module (so that its packages resolve), hidden
	// from ./... by its leading dot.
	dir, err := os.MkdirTemp(".", ".readme-check-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	for k, path := range paths {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		codes, lines := blocks(string(md))
		if len(codes) == 0 {
			t.Fatalf("%s has no go code blocks", path)
		}
		// The directory names the file, so that the compiler's messages do.
		base := filepath.Join(dir, fmt.Sprintf("%d-%s", k, strings.TrimSuffix(filepath.Base(path), ".md")))
		frag := filepath.Join(base, "fragments")
		os.MkdirAll(frag, 0o755)
		os.WriteFile(filepath.Join(frag, "preamble.go"), []byte(preamble), 0o644)
		pkgs = append(pkgs, "./"+frag)
		type fragment struct {
			line int
			code string
		}
		var frags []fragment
		for i, code := range codes {
			if strings.HasPrefix(strings.TrimSpace(code), "package ") {
				d := filepath.Join(base, fmt.Sprintf("file%d", i))
				os.Mkdir(d, 0o755)
				os.WriteFile(filepath.Join(d, "main.go"), []byte(code), 0o644)
				pkgs = append(pkgs, "./"+d)
				continue
			}
			if !importBlock.MatchString(code) && len(frags) > 0 {
				frags[len(frags)-1].code += "\n" + code // a continuation of the fragment above
				continue
			}
			frags = append(frags, fragment{lines[i], code})
		}
		for i, f := range frags {
			name := fmt.Sprintf("line%d.go", f.line)
			os.WriteFile(filepath.Join(frag, name), []byte(fragmentFile(f.code, i)), 0o644)
		}
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, append([]string{"vet"}, pkgs...)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return ""
}

// TestREADMECompiles: the Go code blocks of README.md and of the Markdown
// files under docs/ compile (issue 16: the API snippet did not —
// "declared and not used: err").
func TestREADMECompiles(t *testing.T) {
	files := []string{"../../../README.md"}
	docs, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		md, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if codes, _ := blocks(string(md)); len(codes) > 0 {
			files = append(files, d)
		}
	}
	if len(files) < 2 {
		t.Fatalf("Go code blocks in %v only: the docs' blocks were not found", files)
	}
	if msg := compileMarkdown(t, files...); msg != "" {
		t.Errorf("Go code in %v does not compile (K-NAME/fragments/lineN.go: the block starting at line N of the K-th file, NAME.md):\n%s", files, msg)
	}
}

// TestCompileMarkdownCatchesErrors: the check passes a correct snippet and
// reports a wrong one (so that TestREADMECompiles can fail).
func TestCompileMarkdownCatchesErrors(t *testing.T) {
	if msg := compileMarkdown(t, "testdata/good.md"); msg != "" {
		t.Errorf("good.md: %s", msg)
	}
	if msg := compileMarkdown(t, "testdata/bad.md"); !strings.Contains(msg, "declared and not used") {
		t.Errorf("bad.md: %q, want \"declared and not used\"", msg)
	}
}
