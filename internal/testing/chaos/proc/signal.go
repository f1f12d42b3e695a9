package proc

import (
	"os"
	"os/signal"
	"syscall"
)

func signalNotify(c chan os.Signal) {
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
}
func signalStop(c chan os.Signal) { signal.Stop(c) }
