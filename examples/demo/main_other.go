//go:build !unix

// Command demo needs a Unix system: it freezes and resumes replica processes
// with SIGSTOP and SIGCONT.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "demo: needs Linux or another Unix (it uses SIGSTOP/SIGCONT and process groups)")
	os.Exit(1)
}
