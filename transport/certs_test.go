package transport

import (
	"crypto/tls"
	"testing"

	"github.com/raftlock/raftlock/internal/devcerts"
)

// testCA is a throw-away certificate authority.
type testCA struct{ *devcerts.CA }

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	ca, err := devcerts.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{ca}
}

// leaf issues a certificate usable as server and client.
func (ca *testCA) leaf(t testing.TB, name string) tls.Certificate {
	t.Helper()
	c, err := ca.Leaf(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsConfig returns a mutual TLS config for a node with a certificate
// from ca.
func (ca *testCA) tlsConfig(t testing.TB, name string) *tls.Config {
	return NewMutualTLSConfig(ca.leaf(t, name), ca.Pool, "")
}

// memTLS is tlsConfig for memnet hosts, whose names the certificates do
// not carry: peers are verified against the shared name "raftlock".
func (ca *testCA) memTLS(t testing.TB, name string) *tls.Config {
	return NewMutualTLSConfig(ca.leaf(t, name), ca.Pool, "raftlock")
}
