// Package devcerts makes certificate authorities and certificates: throw-away
// ones for tests, demos and the `replica certs` command of examples/replica
// (development certificates, valid for a day), and, for `replica certs ca`
// and `replica certs issue`, a deployment's CA and the per-replica
// certificates an init container issues from it (see
// examples/deploy/kubernetes).
package devcerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// CA is a certificate authority: its certificate and the key that signs.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	Pool *x509.CertPool
}

// NewCA creates a CA valid from an hour ago for a day (relative to
// time.Now, so that it also works inside a synctest bubble).
func NewCA(name string) (*CA, error) {
	return NewCAUntil(name, time.Now().Add(24*time.Hour))
}

// NewCAUntil creates a CA (a fresh ECDSA P-256 key) valid from an hour ago
// until notAfter.
func NewCAUntil(name string, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return newCA(cert, key), nil
}

func newCA(cert *x509.Certificate, key crypto.Signer) *CA {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// LoadCA reads a CA from its PEM certificate and PEM private key (PKCS#8,
// SEC 1 EC or PKCS#1 RSA). It refuses a key that does not match the
// certificate, a certificate that is not a CA allowed to sign certificates,
// and one that has expired.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	switch {
	case !cert.IsCA || !cert.BasicConstraintsValid:
		return nil, fmt.Errorf("certificate %q is not a CA (basic constraints)", cert.Subject.CommonName)
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, fmt.Errorf("CA %q may not sign certificates (key usage)", cert.Subject.CommonName)
	case time.Now().After(cert.NotAfter):
		return nil, fmt.Errorf("CA %q expired at %s", cert.Subject.CommonName, cert.NotAfter.Format(time.RFC3339))
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA's private key cannot sign")
	}
	return newCA(cert, key), nil
}

// LeafSpec says what a leaf certificate names and until when it is valid.
type LeafSpec struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	URIs       []*url.URL
	NotAfter   time.Time // capped at the CA's own expiry
}

// Issue issues a certificate usable as server and client (a fresh ECDSA
// P-256 key), valid from an hour ago (clock skew) until spec.NotAfter or
// the CA's expiry, whichever comes first.
func (ca *CA) Issue(spec LeafSpec) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	notAfter := spec.NotAfter
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.CommonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  spec.IPs,
		DNSNames:     spec.DNSNames,
		URIs:         spec.URIs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Leaf issues a certificate usable as server and client, valid for a day
// for 127.0.0.1, ::1, "localhost" and the DNS name "raftlock".
func (ca *CA) Leaf(name string) (tls.Certificate, error) {
	return ca.Issue(LeafSpec{CommonName: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames: []string{"raftlock", "localhost"}, NotAfter: time.Now().Add(24 * time.Hour)})
}

// MutualTLS returns a config that presents a fresh certificate named name and
// requires and verifies peers' certificates against the CA.
func (ca *CA) MutualTLS(name string) (*tls.Config, error) {
	cert, err := ca.Leaf(name)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca.Pool,
		ClientCAs:    ca.Pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// PEM returns the CA certificate, and a fresh leaf certificate (Leaf) and
// its key, PEM-encoded (for programs that read TLS files).
func (ca *CA) PEM(name string) (caPEM, certPEM, keyPEM []byte, err error) {
	leaf, err := ca.Leaf(name)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, keyPEM, err = EncodePEM(leaf)
	return ca.CertPEM(), certPEM, keyPEM, err
}

// CertPEM is the CA's certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA's private key, PEM-encoded (PKCS#8).
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePEM encodes a certificate Issue or Leaf made and its ECDSA key.
func EncodePEM(c tls.Certificate) (certPEM, keyPEM []byte, err error) {
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

// newSerial is a random 62-bit serial number.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, big.NewInt(1<<62))
}
