package fence_test

import (
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/fence"
)

// A resource kept in memory, written by lock holders with their fencing
// tokens: the paused holder with token 41 resumes after the holder with token
// 42 wrote, and its write is refused.
func ExampleMemory_Do() {
	var f fence.Memory
	doc := ""
	write := func(token uint64, body string) error {
		return f.Do("doc:842", token, func() error { doc = body; return nil })
	}
	fmt.Println(write(41, "draft from 41"))
	fmt.Println(write(42, "final from 42"))
	err := write(41, "late write from 41")
	fmt.Println(errors.Is(err, fence.ErrStaleToken), doc)
	// Output:
	// <nil>
	// <nil>
	// true final from 42
}
