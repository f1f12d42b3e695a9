package readmetest

import (
	"fmt"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../../.."

// repoFiles returns the files under root, as slash paths relative to it.
// Hidden directories are skipped, and so are directories named testdata
// below root (fixtures name files that do not exist on purpose).
func repoFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, rel)
		return nil
	})
	return files, err
}

// docFiles returns the Markdown files of files (repoFiles): those whose
// references missingPaths checks.
func docFiles(files []string) []string {
	var docs []string
	for _, f := range files {
		if path.Ext(f) == ".md" {
			docs = append(docs, f)
		}
	}
	return docs
}

// A fileIndex answers whether a name that a document or a comment writes
// names a file of the tree at root.
type fileIndex struct {
	root string
}

// exists reports whether the slash path p, relative to the root, exists.
func (x *fileIndex) exists(p string) bool {
	_, err := os.Stat(filepath.Join(x.root, filepath.FromSlash(p)))
	return err == nil
}

// moduleRoot returns the directory of the go.mod that governs dir (a
// nested module's own), or "." if none below the root does.
func (x *fileIndex) moduleRoot(dir string) string {
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if x.exists(path.Join(d, "go.mod")) {
			return d
		}
	}
	return "."
}

// names reports whether name, written in a file of directory dir, names a
// file that exists: name is a path relative to dir, to dir's module root
// or to the root. A bare name is thus a file of dir (or of a root): the
// bare name of a file of fsm, written outside fsm, does not count — it
// would break unseen when the file moved; name the function or type
// instead.
func (x *fileIndex) names(dir, name string) bool {
	return x.exists(path.Join(dir, name)) || x.exists(path.Join(x.moduleRoot(dir), name)) || x.exists(name)
}

// A pathRef is a repository path named by a Markdown file: the target of a
// relative link or image, or an inline code span that looks like a path.
type pathRef struct {
	Line     int    // 1-based line in the Markdown file
	Path     string // as written, without a #fragment or ?query; "" for an anchor of the file itself
	Fragment string // a link's #fragment, unescaped ("" if none)
	Link     bool   // a link's target (else a code span)
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	urlScheme  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	lineSuffix = regexp.MustCompile(`:\d+(-\d+)?$`)
)

// fileExtensions are the endings that make a code span with a slash a file
// path (the kinds of file the repository holds).
var fileExtensions = []string{".go", ".md", ".sh", ".json", ".svg", ".mod", ".sum", ".yaml", ".yml", ".html", ".service", ".env", ".txt", ".sql"}

// sourceExtensions are the endings that make a bare name (no slash) a file
// of the repository: its sources and documents. Other bare names (a
// data directory's raft.db, Consul's peers.json, a chart the bench draws)
// are names of files programs write, not of the repository's.
var sourceExtensions = []string{".go", ".md", ".sh"}

// pathRefs returns the paths md names: relative link targets (any), and
// code spans outside fenced blocks that are one word with a slash and end
// in a file extension, or whose first element names a directory of the
// repository or of the Markdown file's own directory (isDir answers: so
// `fsm/` and `internal/testing/chaos` are paths, `wal/` — a data directory's — and
// `hashicorp/raft` are not).
func pathRefs(md string, isDir func(string) bool) []pathRef {
	var refs []pathRef
	for i, line := range unfencedLines(md) {
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if urlScheme.MatchString(t) || strings.HasPrefix(t, "//") {
				continue
			}
			t, frag, _ := strings.Cut(t, "#")
			t, _, _ = strings.Cut(t, "?")
			if u, err := url.PathUnescape(t); err == nil {
				t = u
			}
			if u, err := url.PathUnescape(frag); err == nil {
				frag = u
			}
			if t != "" || frag != "" {
				refs = append(refs, pathRef{Line: i + 1, Path: t, Fragment: frag, Link: true})
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if p, ok := codePath(m[1], isDir); ok {
				refs = append(refs, pathRef{Line: i + 1, Path: p})
			}
		}
	}
	return refs
}

// unfencedLines yields the lines of md outside fenced code blocks (``` or
// ~~~; the fences are not yielded either) with their 0-based index.
func unfencedLines(md string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		fenced := false
		for i, line := range strings.Split(md, "\n") {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
				fenced = !fenced
				continue
			}
			if !fenced && !yield(i, line) {
				return
			}
		}
	}
}

// codePath reports whether a code span's text looks like a repository path
// (a path as pathRefs says, or a bare name with one of sourceExtensions),
// and returns it without a leading "./" or a trailing ":line".
func codePath(s string, isDir func(string) bool) (string, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "./")
	if s == "" || strings.ContainsAny(s, " \t*?{}[]<>$|=~@,;'\"()`\\…") || strings.Contains(s, "://") ||
		strings.HasPrefix(s, "/") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, ".") {
		return "", false
	}
	s = lineSuffix.ReplaceAllString(s, "")
	if !strings.Contains(s, "/") {
		if slices.Contains(sourceExtensions, path.Ext(s)) && !strings.HasPrefix(s, "_") {
			return s, true // a bare file name, as `doc.go`
		}
		return "", false
	}
	first, _, _ := strings.Cut(s, "/")
	if slices.Contains(fileExtensions, path.Ext(s)) || isDir(first) {
		return s, true
	}
	return "", false
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// anchors returns the fragments a link into the Markdown text md may use:
// its headings' anchors as GitHub makes them (lower case; letters, digits,
// "-" and "_" kept, spaces made "-", the rest dropped; a repeated heading
// gets "-1", "-2", …) and the ids of <a id="…"> or <a name="…"> tags.
// Headings inside fenced blocks are not headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range unfencedLines(md) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// missingPaths returns the references of the Markdown file (relative to
// x's root) to files that do not exist, as "file:line: path" — a link
// relative to the file's directory (or, starting with "/", to the root), a
// code span as fileIndex.names resolves it — and the links to a heading of
// a Markdown file (another or its own) that it does not have, as
// "file:line: anchor path#fragment".
func missingPaths(x *fileIndex, file string) ([]string, error) {
	root, exists := x.root, x.exists
	md, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	dir := path.Dir(file)
	isDir := func(name string) bool {
		for _, p := range []string{path.Join(dir, name), name} {
			if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err == nil && fi.IsDir() {
				return true
			}
		}
		return false
	}
	var missing []string
	for _, r := range pathRefs(string(md), isDir) {
		if r.Link && r.Path == "" { // #fragment: a heading of this file
			if !anchors(string(md))[r.Fragment] {
				missing = append(missing, fmt.Sprintf("%s:%d: anchor #%s", file, r.Line, r.Fragment))
			}
			continue
		}
		var found bool
		switch {
		case r.Link && strings.HasPrefix(r.Path, "/"): // repository-root relative, as GitHub resolves it
			found = exists(r.Path)
		case r.Link:
			found = exists(path.Join(dir, r.Path))
		default:
			found = x.names(dir, r.Path)
		}
		if !found {
			kind := "code span"
			if r.Link {
				kind = "link"
			}
			missing = append(missing, fmt.Sprintf("%s:%d: %s %s", file, r.Line, kind, r.Path))
			continue
		}
		if r.Link && r.Fragment != "" && path.Ext(r.Path) == ".md" {
			target := path.Join(dir, r.Path)
			if strings.HasPrefix(r.Path, "/") {
				target = strings.TrimPrefix(r.Path, "/")
			}
			tmd, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(target)))
			if err != nil {
				return nil, err
			}
			if !anchors(string(tmd))[r.Fragment] {
				missing = append(missing, fmt.Sprintf("%s:%d: anchor %s#%s", file, r.Line, r.Path, r.Fragment))
			}
		}
	}
	return missing, nil
}

// TestDocsNameExistingPaths: every path a Markdown file of the repository
// links to or names in a code span exists, and every heading it links to
// (#fragment) exists (issue 47: documents named result files and write-ups
// that had been deleted or never existed; README's reference moved to
// docs/ and links into it must follow).
func TestDocsNameExistingPaths(t *testing.T) {
	all, err := repoFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	x, files := &fileIndex{root: repoRoot}, docFiles(all)
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "bench/README.md") {
		t.Fatalf("the walk found %v: README.md and bench/README.md missing", files)
	}
	for _, f := range files {
		missing, err := missingPaths(x, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range missing {
			t.Errorf("%s does not exist", m)
		}
	}
}

// TestMissingPathsCatchesBrokenReferences: the check reports a broken link,
// a broken image, a broken code-span path, directory and bare file name,
// and nothing for existing paths and bare names, URLs, existing anchors (a
// repeated heading's "-1" included), globs, commands, fenced blocks, import
// paths and names of files programs write; and a
// broken anchor of another file and of its own (so that
// TestDocsNameExistingPaths can fail, and fails only on real breakage).
func TestMissingPathsCatchesBrokenReferences(t *testing.T) {
	got, err := missingPaths(&fileIndex{root: "."}, "testdata/paths/README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"testdata/paths/README.md:5: link gone.md",
		"testdata/paths/README.md:6: link results/gone.svg",
		"testdata/paths/README.md:7: code span results/old-run-2026-01-01.json",
		"testdata/paths/README.md:8: code span sub/gone/",
		"testdata/paths/README.md:9: code span sub/gone",
		"testdata/paths/README.md:10: link /testdata/paths/gone.md",
		"testdata/paths/README.md:16: anchor sub/ok.md#gone",
		"testdata/paths/README.md:16: anchor #gone",
		"testdata/paths/README.md:16: anchor #x-2",
		"testdata/paths/README.md:26: code span ok.md",
		"testdata/paths/README.md:26: code span gone.go",
	}
	if !slices.Equal(got, want) {
		t.Errorf("missingPaths:\n got %q\nwant %q", got, want)
	}
}
