// Package browsertest tests the admin API's status page in a real browser:
// headless Chromium (through chromedp) loads the page of a running cluster
// of three examples/replica processes, and the test checks what it
// renders, kills replicas and checks the warnings and the red banner
// appear. A nested module, so that chromedp stays out of raftlock's
// go.mod. Run it with
//
//	cd admin/browsertest && go test -v .
//
// It needs chromium (Debian package "chromium") on PATH or in
// RAFTLOCK_CHROMIUM; without it the test is skipped (and .ci/run, which
// installs it, fails on a skip). Screenshots (PNG) go to
// RAFTLOCK_SCREENSHOTS (default: the test's temporary directory).
package browsertest
