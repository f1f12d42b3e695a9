package comments

// Existing: refs.go (this directory), testdata/paths/README.md (from the root); not: ok.md (another directory's).
// Not names of the repository's files: https://github.com/hashicorp/raft/blob/main/net_transport.go, *.go, _test.go, peers.json, go.mod.
// A stale bare name: primitives.go.
// A stale path: sub/gone.md.
/*
   A block comment: ../paths/sub/ok.md exists,
   and x.go.txt is no Go file,
   but gone.sh does not exist.
*/
// testdata/paths/gone.go
var s = "gone.go is in a string"
