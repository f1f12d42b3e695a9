package readmetest

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commentFileName matches a file name in a comment's text: a bare name or a
// slash path ending in one of sourceExtensions, not inside a longer word,
// path or URL (what precedes it is no letter, digit, ".", "/", "-" or "*",
// and a "_" starts no name: "*.go" and "_test.go" are patterns).
var commentFileName = regexp.MustCompile(`(?:^|[^\w./*-])((?:[\w.-]+/)*[A-Za-z0-9-][\w.-]*\.(?:go|md|sh))\b`)

// A commentRef is a file name a Go comment writes.
type commentRef struct {
	Line int    // 1-based line of the name in the Go file
	Name string // as written
}

// commentRefs returns the file names the comments of the Go source src
// write (commentFileName), in order. String literals are not comments.
func commentRefs(src []byte) []commentRef {
	if !bytes.Contains(src, []byte(".go")) && !bytes.Contains(src, []byte(".md")) && !bytes.Contains(src, []byte(".sh")) {
		return nil
	}
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var refs []commentRef
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return refs
		}
		if tok != token.COMMENT || !strings.Contains(lit, ".go") && !strings.Contains(lit, ".md") && !strings.Contains(lit, ".sh") {
			continue
		}
		line := fset.Position(pos).Line
		for _, m := range commentFileName.FindAllStringSubmatchIndex(lit, -1) {
			if strings.HasSuffix(lit[:m[2]], "://") || longerName(lit[m[3]:]) {
				continue
			}
			refs = append(refs, commentRef{Line: line + strings.Count(lit[:m[2]], "\n"), Name: lit[m[2]:m[3]]})
		}
	}
}

// longerName reports whether rest, the text after a match of
// commentFileName, continues the name: "x.go.txt", "x.go/y", "x.sh-like".
// A sentence's full stop does not.
func longerName(rest string) bool {
	if rest == "" {
		return false
	}
	switch c := rest[0]; {
	case c == '/' || c == '-':
		return true
	case c == '.':
		return len(rest) > 1 && (rest[1] == '_' || rest[1] == '-' || rest[1] >= '0' && rest[1] <= '9' ||
			rest[1] >= 'A' && rest[1] <= 'Z' || rest[1] >= 'a' && rest[1] <= 'z')
	}
	return false
}

// staleCommentNames returns, for every Go file of files (relative to x's
// root), the file names its comments write that name no file
// (fileIndex.names), as "file:line: name".
func staleCommentNames(x *fileIndex, files []string) ([]string, error) {
	var stale []string
	for _, f := range files {
		if path.Ext(f) != ".go" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(x.root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		for _, r := range commentRefs(src) {
			if !x.names(path.Dir(f), r.Name) {
				stale = append(stale, fmt.Sprintf("%s:%d: %s", f, r.Line, r.Name))
			}
		}
	}
	return stale, nil
}

// TestCommentsNameExistingFiles: every file a Go comment of the repository
// (every module's) names exists (issue 47: fsm/command.go cited a file
// that did not exist). Better still, a comment names the function or type.
func TestCommentsNameExistingFiles(t *testing.T) {
	all, err := repoFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all, "fsm/command.go") || !slices.Contains(all, "bench/main.go") {
		t.Fatalf("the walk found %d files, not fsm/command.go and bench/main.go", len(all))
	}
	stale, err := staleCommentNames(&fileIndex{root: repoRoot}, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Errorf("%s does not exist", s)
	}
}

// TestStaleCommentNamesCatchesMissingFiles: the check reports a bare name
// and a path that name no file and a bare name of another directory's
// file, in line and block comments alike, and nothing for names of files
// in the comment's directory, paths from it and from the root, URLs,
// patterns, other extensions and string literals (so that TestCommentsNameExistingFiles can fail, and
// fails only on real breakage).
func TestStaleCommentNamesCatchesMissingFiles(t *testing.T) {
	got, err := staleCommentNames(&fileIndex{root: "."}, []string{"testdata/comments/refs.go"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"testdata/comments/refs.go:3: ok.md",
		"testdata/comments/refs.go:5: primitives.go",
		"testdata/comments/refs.go:6: sub/gone.md",
		"testdata/comments/refs.go:10: gone.sh",
		"testdata/comments/refs.go:12: testdata/paths/gone.go",
	}
	if !slices.Equal(got, want) {
		t.Errorf("staleCommentNames:\n got %q\nwant %q", got, want)
	}
}
