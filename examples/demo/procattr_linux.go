package main

import "syscall"

// childProcAttr puts a replica in its own process group (a Ctrl-C reaches
// only the demo, which then cleans up) and has the kernel kill it if the
// demo dies.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
