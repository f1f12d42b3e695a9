package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFree(t *testing.T) {
	addrs, err := Free(9)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Errorf("%s twice", a)
		}
		seen[a] = true
		_, p, _ := net.SplitHostPort(a)
		if port, _ := strconv.Atoi(p); port < 10000 || port >= ephemeralLow() {
			t.Errorf("%s outside [10000, %d)", a, ephemeralLow())
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s not free for TCP: %v", a, err)
			continue
		}
		pc, err := net.ListenPacket("udp", a)
		if err != nil {
			t.Errorf("%s not free for UDP: %v", a, err)
		} else {
			pc.Close()
		}
		ln.Close()
	}
}
