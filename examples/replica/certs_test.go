package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certs ca writes a CA once; certs issue signs, with it, a certificate that
// names one replica id (common name and URI raftlock://ID) and carries the
// shared DNS name, chains to the CA, never outlives it, and a replica loads
// it with the CA copy written beside it.
func TestCertsCAAndIssue(t *testing.T) {
	dir := t.TempDir()
	caDir, out := filepath.Join(dir, "ca"), filepath.Join(dir, "tls")
	var stderr bytes.Buffer
	if err := certs([]string{"ca", "-dir", caDir, "-valid", "48h"}, &stderr); err != nil {
		t.Fatalf("certs ca: %v: %s", err, stderr.String())
	}
	caKey, _ := os.ReadFile(filepath.Join(caDir, "ca-key.pem"))
	if err := certs([]string{"ca", "-dir", caDir}, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "not replacing a CA key") {
		t.Errorf("certs ca over an existing CA: %v %q, want it refused", err, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(caDir, "ca-key.pem")); !bytes.Equal(b, caKey) {
		t.Errorf("the refused certs ca replaced the CA key")
	}

	ca, key := filepath.Join(caDir, "ca.pem"), filepath.Join(caDir, "ca-key.pem")
	if err := certs([]string{"issue", "-ca", ca, "-ca-key", key, "-id", "raftlock-3", "-dns", "raftlock,raftlock-3.raftlock.locks.svc.cluster.local",
		"-valid", "8760h", "-dir", out}, &stderr); err != nil {
		t.Fatalf("certs issue: %v: %s", err, stderr.String())
	}
	for _, f := range []string{"ca.pem", "tls.pem", "tls-key.pem"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi, err)
		}
	}
	if _, err := loadTLS(filepath.Join(out, "ca.pem"), filepath.Join(out, "tls.pem"), filepath.Join(out, "tls-key.pem"), "raftlock"); err != nil {
		t.Fatalf("the replica does not load what certs issue wrote: %v", err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(out, "tls.pem"), filepath.Join(out, "tls-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	caPEM, _ := os.ReadFile(ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "raftlock", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the certificate does not verify as raftlock against the CA: %v", err)
	}
	if leaf.Subject.CommonName != "raftlock-3" || len(leaf.URIs) != 1 || leaf.URIs[0].String() != "raftlock://raftlock-3" {
		t.Errorf("the certificate names %q %v, want raftlock-3 as common name and URI", leaf.Subject.CommonName, leaf.URIs)
	}
	if leaf.NotAfter.After(time.Now().Add(48 * time.Hour)) {
		t.Errorf("the certificate is valid until %v, after its CA (48 h)", leaf.NotAfter)
	}

	// A CA rotation: the -ca file holds the new CA (which signs) and the old
	// one; the replica gets both to trust.
	ca2Dir, out2 := filepath.Join(dir, "ca2"), filepath.Join(dir, "tls2")
	if err := certs([]string{"ca", "-dir", ca2Dir}, &stderr); err != nil {
		t.Fatal(err)
	}
	ca2PEM, _ := os.ReadFile(filepath.Join(ca2Dir, "ca.pem"))
	bundle := filepath.Join(dir, "bundle.pem")
	os.WriteFile(bundle, append(ca2PEM, caPEM...), 0o600)
	if err := certs([]string{"issue", "-ca", bundle, "-ca-key", filepath.Join(ca2Dir, "ca-key.pem"), "-id", "r1", "-dir", out2}, &stderr); err != nil {
		t.Fatalf("certs issue with a CA bundle: %v: %s", err, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(out2, "ca.pem")); !bytes.Equal(b, append(ca2PEM, caPEM...)) {
		t.Errorf("ca.pem after issuing with a bundle is not the bundle")
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"issue", "-ca", ca, "-ca-key", key, "-dir", out}, `-id ""`},
		{[]string{"issue", "-ca", ca, "-ca-key", key, "-id", "raftlock 3", "-dir", out}, `-id "raftlock 3"`},
		{[]string{"issue", "-ca", ca, "-id", "r1", "-dir", out}, "-ca-key and -dir are required"},
		{[]string{"issue", "-ca", filepath.Join(out, "tls.pem"), "-ca-key", filepath.Join(out, "tls-key.pem"), "-id", "r1", "-dir", out}, "not a CA"},
		{[]string{"issue", "-ca", ca, "-ca-key", filepath.Join(out, "tls-key.pem"), "-id", "r1", "-dir", out}, "private key does not match"},
		{[]string{"issue", "-ca", ca, "-ca-key", key, "-id", "r1", "-dir", out, "extra"}, "unexpected arguments"},
	} {
		stderr.Reset()
		if err := certs(c.args, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("certs %q: %v %q, want a usage error saying %q", c.args, err, stderr.String(), c.want)
		}
	}
}
