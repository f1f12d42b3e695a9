// Package readmetest checks the repository's documents and comments (its
// tests do; the package has no code): the files they name exist, and the Go
// code blocks of README.md and of the Markdown files under docs/ compile.
//
// Paths (TestDocsNameExistingPaths): in every Markdown file of the
// repository (testdata aside), each relative link or image target, and each
// inline code span that is one word and either has a slash and ends in a
// file extension of the repository's kinds, or has a slash and starts with
// the name of a directory (of the repository's root or of the document's
// own directory), or is a bare name ending in .go, .md or .sh, must exist:
// a link relative to the document's directory, a code span as names in
// comments resolve (below). Fenced blocks, URLs, anchors and globs are not
// checked.
//
// Names in comments (TestCommentsNameExistingFiles): in the comments of
// every Go file of the repository (every module's; testdata aside), each
// name ending in .go, .md or .sh must name a file that exists, as a path
// relative to the commenting file's directory, to its module's root or to
// the repository's root. A bare name is thus a file of the same directory:
// the bare name of a file of fsm, written outside fsm, fails (it would
// break unseen when the file moved); such comments name the function or
// type instead, as comments should anyway.
//
// Code blocks (TestREADMECompiles), in README.md and docs/*.md, each
// file on its own: a block that starts with
// "package" is compiled as a file of its own; any other block is a
// fragment: its import block is kept, the standard packages it uses are
// imported for it, and the rest becomes the body of a function
// that returns an error (so a fragment may "return err"; "return nil" is
// added unless it ends with a return). A fragment without an import block
// continues the fragment above it (the same function: it may use what that
// one declared).
// A fragment may use these names without declaring them: ctx
// (context.Context), mtlsConfig (*tls.Config), key ([]byte), db
// (*sql.DB), runReport (func(context.Context, lockapi.Token) error). Every
// other name must be declared and every variable used, as in real code.
package readmetest
