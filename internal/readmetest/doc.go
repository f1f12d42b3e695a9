// Package readmetest checks that the Go code blocks of README.md compile
// (its test does; the package has no code). A block that starts with
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
