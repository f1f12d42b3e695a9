package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	stat := []byte("1234 (we ird) name)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 100 1000 50 18446744073709551615\n")
	got, err := ParseCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 325 * 10 * time.Millisecond; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseCPU([]byte("garbage")); err == nil {
		t.Error("no error for garbage")
	}
}

func TestParseRSS(t *testing.T) {
	status := []byte("Name:\tx\nVmPeak:\t 999 kB\nVmRSS:\t   2048 kB\nThreads:\t4\n")
	got, err := ParseRSS(status)
	if err != nil || got != 2048*1024 {
		t.Errorf("got %d, %v", got, err)
	}
	if _, err := ParseRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("no error without VmRSS")
	}
}

func TestParseSleeps(t *testing.T) {
	status := []byte("Name:\tx\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n")
	got, err := ParseSleeps(status)
	if err != nil || got != 1234 {
		t.Errorf("got %d, %v; want 1234 (not the nonvoluntary count)", got, err)
	}
	if _, err := ParseSleeps([]byte("Name:\tx\n")); err == nil {
		t.Error("no error without voluntary_ctxt_switches")
	}
}

func TestReadSelf(t *testing.T) {
	u, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSSBytes <= 0 {
		t.Errorf("rss %d", u.RSSBytes)
	}
	// Sleeping blocks this thread: the count must grow.
	for range 3 {
		time.Sleep(time.Millisecond)
	}
	v, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if v.Sleeps <= u.Sleeps {
		t.Errorf("voluntary context switches %d then %d after three sleeps", u.Sleeps, v.Sleeps)
	}
}
