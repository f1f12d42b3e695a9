package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
)

// NewMutualTLSConfig returns a *tls.Config for Config.TLS: this node
// presents cert (as server and as client) and accepts exactly the peers
// whose certificates ca signed.
//
// serverName is the name every peer's certificate is verified against.
// Leave it "" to verify against the host part of each dialed address: the
// peer's certificate must then carry that host as a DNS name or, for an IP
// address such as 10.0.0.5, as an IP SAN. When nodes are addressed by IP
// and certificates are issued per role rather than per host, give every
// node's certificate one shared DNS SAN (e.g. "raftlock") and pass it here.
func NewMutualTLSConfig(cert tls.Certificate, ca *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca,
		ClientCAs:    ca,
		ServerName:   serverName,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
}

// checkTLS rejects configs that cannot give mutual, verified TLS.
func checkTLS(c *tls.Config) error {
	switch {
	case c.InsecureSkipVerify:
		return errors.New("InsecureSkipVerify must be false: peers must verify each other")
	case len(c.Certificates) == 0 && (c.GetCertificate == nil || c.GetClientCertificate == nil):
		return errors.New("no certificate: set Certificates (or both GetCertificate and GetClientCertificate); every node is both server and client")
	case c.ClientCAs == nil && c.GetConfigForClient == nil:
		return errors.New("ClientCAs is nil: set the CA pool that signs peer certificates (client certificates are required and verified)")
	case c.RootCAs == nil:
		return errors.New("RootCAs is nil: set the CA pool that signs peer certificates (servers are verified against it)")
	case c.MaxVersion != 0 && c.MaxVersion < tls.VersionTLS12:
		return errors.New("MaxVersion is below TLS 1.2")
	}
	return nil
}

// serverTLS derives the server-side config: client certificates required
// and verified, TLS 1.2 at least.
func serverTLS(c *tls.Config) *tls.Config {
	s := c.Clone()
	s.ClientAuth = tls.RequireAndVerifyClientCert
	if s.MinVersion < tls.VersionTLS12 {
		s.MinVersion = tls.VersionTLS12
	}
	return s
}

// clientTLS derives the client-side config for dialing addr: ServerName
// defaults to addr's host (crypto/tls checks IP SANs when it is an IP).
func clientTLS(c *tls.Config, addr string) *tls.Config {
	cl := c.Clone()
	if cl.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cl.ServerName = host
	}
	if cl.MinVersion < tls.VersionTLS12 {
		cl.MinVersion = tls.VersionTLS12
	}
	return cl
}

// verifiedChain returns the peer's verified certificate chain (leaf first)
// of a TLS connection after its handshake; nil without TLS.
func verifiedChain(c net.Conn) []*x509.Certificate {
	if tc, ok := c.(*tls.Conn); ok {
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 {
			return st.VerifiedChains[0]
		}
	}
	return nil
}
