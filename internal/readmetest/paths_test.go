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
const repoRoot = "../.."

// docFiles returns the Markdown files whose references checkedPaths
// checks, relative to root: every README.md of the repository and every
// Markdown file under docs/. Hidden directories and testdata are skipped.
func docFiles(root string) ([]string, error) {
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
		if d.Name() == "README.md" || (strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md")) {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
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

// pathRefs returns the paths md names: relative link targets (any), and
// code spans outside fenced blocks that are one word with a slash and end
// in a file extension, or whose first element names a directory of the
// repository or of the Markdown file's own directory (isDir answers: so
// `fsm/` and `internal/chaos` are paths, `wal/` — a data directory's — and
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

// codePath reports whether a code span's text looks like a repository path,
// and returns it without a leading "./" or a trailing ":line".
func codePath(s string, isDir func(string) bool) (string, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "./")
	if s == "" || strings.ContainsAny(s, " \t*?{}[]<>$|=~@,;'\"()`\\…") || strings.Contains(s, "://") ||
		strings.HasPrefix(s, "/") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, ".") || !strings.Contains(s, "/") {
		return "", false
	}
	s = lineSuffix.ReplaceAllString(s, "")
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
// root) to paths that exist neither relative to the file's directory nor
// relative to root, as "file:line: path", and the links to a heading of a
// Markdown file (another or its own) that it does not have, as
// "file:line: anchor path#fragment".
func missingPaths(root, file string) ([]string, error) {
	md, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	dir := path.Dir(file)
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil
	}
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
			found = exists(path.Join(dir, r.Path)) || exists(r.Path)
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

// TestDocsNameExistingPaths: every path a README or a file under docs/
// links to or names in a code span exists, and every heading it links to
// (#fragment) exists (issue 47: documents named result files and write-ups
// that had been deleted or never existed; README's reference moved to
// docs/ and links into it must follow).
func TestDocsNameExistingPaths(t *testing.T) {
	files, err := docFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "bench/README.md") {
		t.Fatalf("the walk found %v: README.md and bench/README.md missing", files)
	}
	for _, f := range files {
		missing, err := missingPaths(repoRoot, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range missing {
			t.Errorf("%s does not exist", m)
		}
	}
}

// TestMissingPathsCatchesBrokenReferences: the check reports a broken link,
// a broken image, a broken code-span path and directory, and nothing for
// existing paths, URLs, existing anchors (a repeated heading's "-1"
// included), globs, commands, fenced blocks and import paths; and a
// broken anchor of another file and of its own (so that
// TestDocsNameExistingPaths can fail, and fails only on real breakage).
func TestMissingPathsCatchesBrokenReferences(t *testing.T) {
	got, err := missingPaths(".", "testdata/paths/README.md")
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
	}
	if !slices.Equal(got, want) {
		t.Errorf("missingPaths:\n got %q\nwant %q", got, want)
	}
}
