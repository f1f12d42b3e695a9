// Package readmetest checks the repository's documents (its tests do; the
// package has no code): the paths they name exist, and the Go code blocks of
// README.md and of the Markdown files under docs/ compile.
//
// Paths (TestDocsNameExistingPaths): in every README.md and every Markdown
// file under docs/, each relative link or image target, and each inline
// code span that is one word with a slash and either ends in a file
// extension of the repository's kinds or starts with the name of a
// directory (of the repository's root or of the document's own directory),
// must exist relative to the document's directory (links) or to it or the
// root (code spans). Fenced blocks, URLs, anchors and globs are not checked.
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
