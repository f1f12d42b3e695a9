package lockservice

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

var (
	mu       sync.Mutex
	registry = map[string]System{}
)

// Register makes a system available by name. It panics on a duplicate name.
func Register(s System) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[s.Name()]; dup {
		panic("lockservice: duplicate system " + s.Name())
	}
	registry[s.Name()] = s
}

// Lookup returns the registered system with this name.
func Lookup(name string) (System, error) {
	mu.Lock()
	defer mu.Unlock()
	s, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown system %q (have: %s)", name, strings.Join(namesLocked(), ", "))
	}
	return s, nil
}

// Names lists the registered systems, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
