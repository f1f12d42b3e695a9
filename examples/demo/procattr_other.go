//go:build unix && !linux

package main

import "syscall"

// childProcAttr puts a replica in its own process group (a Ctrl-C reaches
// only the demo, which then cleans up). Replicas also exit when they notice
// that the demo is gone (watchParent).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
