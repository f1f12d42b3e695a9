package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/raftlock/raftlock/internal/devcerts"
)

// certs runs `replica certs`: without a subcommand it writes trial
// certificates (certsTrial); `certs ca` writes a deployment's CA and
// `certs issue` a replica's certificate from it (what the Kubernetes
// manifest's init container runs at every pod start).
func certs(args []string, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "ca":
			return certsCA(args[1:], stderr)
		case "issue":
			return certsIssue(args[1:], stderr)
		}
	}
	return certsTrial(args, stderr)
}

// certsFlags parses a certs subcommand's flags: a usage error is errUsage,
// -h is no error (done reports that the usage was printed).
func certsFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (done bool, err error) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return true, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return true, errUsage
	}
	return false, nil
}

// certsTrial writes a throw-away CA and one certificate per replica (valid
// for a day, with the DNS SAN "raftlock" so that every replica can use
// -tls-server-name raftlock whatever its address). For trying mutual TLS
// out; production certificates come from your own CA (certs ca, certs issue).
func certsTrial(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("replica certs", flag.ContinueOnError)
	dir := fs.String("dir", "certs", "output directory")
	names := fs.String("names", "r1,r2,r3", "comma-separated replica ids")
	if done, err := certsFlags(fs, args, stderr); done {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	ca, err := devcerts.NewCA("raftlock example CA")
	if err != nil {
		return err
	}
	for _, name := range strings.Split(*names, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		caPEM, certPEM, keyPEM, err := ca.PEM(name)
		if err != nil {
			return err
		}
		for file, b := range map[string][]byte{"ca.pem": caPEM, name + ".pem": certPEM, name + "-key.pem": keyPEM} {
			if err := os.WriteFile(filepath.Join(*dir, file), b, 0o600); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stderr, "wrote %s/ca.pem and a certificate and key per replica (%s); they expire in 24 h\n", *dir, *names)
	return nil
}

// Lifetimes of what certs ca and certs issue write (kubeadm's choices).
const (
	defaultCAValidity   = 10 * 365 * 24 * time.Hour
	defaultLeafValidity = 365 * 24 * time.Hour
)

// certsCA writes a deployment's CA: DIR/ca.pem and DIR/ca-key.pem (which
// only what issues the replicas' certificates may read). It never
// overwrites a CA key: the replicas' certificates chain to it.
func certsCA(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("replica certs ca", flag.ContinueOnError)
	dir := fs.String("dir", "ca", "output directory")
	name := fs.String("name", "raftlock CA", "the CA's common name")
	valid := fs.Duration("valid", defaultCAValidity, "how long the CA is valid")
	if done, err := certsFlags(fs, args, stderr); done {
		return err
	}
	if *valid <= 0 {
		fmt.Fprintf(stderr, "replica certs ca: -valid %v: want a positive duration\n", *valid)
		return errUsage
	}
	keyFile := filepath.Join(*dir, "ca-key.pem")
	if _, err := os.Stat(keyFile); err == nil {
		fmt.Fprintf(stderr, "replica certs ca: %s exists: not replacing a CA key (the certificates it signed would no longer be trusted)\n", keyFile)
		return errUsage
	}
	ca, err := devcerts.NewCAUntil(*name, time.Now().Add(*valid))
	if err != nil {
		return err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if err := writeFiles(*dir, map[string][]byte{"ca.pem": ca.CertPEM(), "ca-key.pem": keyPEM}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s/ca.pem and %s (valid until %s)\n", *dir, keyFile, ca.Cert.NotAfter.Format(time.DateOnly))
	return nil
}

// nodeIDPattern is the node ids node.Config accepts.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// certsIssue signs a certificate for one replica id with a CA's key: the
// certificate names the id (common name and URI raftlock://ID, which is
// what a cluster's leader checks before it adds a member: a replica holding
// it cannot claim another id) and carries the DNS names -dns (the shared
// name every peer verifies, -tls-server-name). It writes DIR/tls.pem,
// DIR/tls-key.pem and a copy of the -ca file DIR/ca.pem (every CA in it is
// trusted; the first one signs, with -ca-key): a replica configured with
// these three files never needs the CA key.
func certsIssue(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("replica certs issue", flag.ContinueOnError)
	caFile := fs.String("ca", "", "PEM file of the CA certificate that signs, then any other CA certificates to trust (required)")
	caKeyFile := fs.String("ca-key", "", "PEM file of the CA's private key (required)")
	id := fs.String("id", "", "the replica id the certificate names (required)")
	dns := fs.String("dns", "raftlock", "comma-separated DNS names the certificate carries (the shared -tls-server-name first)")
	dir := fs.String("dir", "", "output directory (required)")
	valid := fs.Duration("valid", defaultLeafValidity, "how long the certificate is valid (at most as long as the CA); a replica reads it at start")
	if done, err := certsFlags(fs, args, stderr); done {
		return err
	}
	usage := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "replica certs issue: "+format+"\n", a...)
		return errUsage
	}
	switch {
	case *caFile == "" || *caKeyFile == "" || *dir == "":
		return usage("-ca, -ca-key and -dir are required")
	case !nodeIDPattern.MatchString(*id):
		return usage("-id %q: want the replica's id, 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", *id)
	case *valid <= 0:
		return usage("-valid %v: want a positive duration", *valid)
	}
	var names []string
	for _, n := range strings.Split(*dns, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	caPEM, err := os.ReadFile(*caFile)
	if err != nil {
		return usage("-ca: %v", err)
	}
	keyPEM, err := os.ReadFile(*caKeyFile)
	if err != nil {
		return usage("-ca-key: %v", err)
	}
	ca, err := devcerts.LoadCA(caPEM, keyPEM)
	if err != nil {
		return usage("-ca %s, -ca-key %s: %v", *caFile, *caKeyFile, err)
	}
	leaf, err := ca.Issue(devcerts.LeafSpec{CommonName: *id, DNSNames: names,
		URIs: []*url.URL{{Scheme: "raftlock", Host: *id}}, NotAfter: time.Now().Add(*valid)})
	if err != nil {
		return err
	}
	certPEM, leafKeyPEM, err := devcerts.EncodePEM(leaf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	// ca.pem is the -ca file whole: during a CA rotation it holds the
	// old and the new CA (the first one signs), and the replica trusts both.
	if err := writeFiles(*dir, map[string][]byte{"ca.pem": caPEM, "tls.pem": certPEM, "tls-key.pem": leafKeyPEM}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s/tls.pem and tls-key.pem for %s (DNS %s), valid until %s, and the CA's ca.pem\n",
		*dir, *id, strings.Join(names, ","), leaf.Leaf.NotAfter.Format(time.RFC3339))
	return nil
}

// writeFiles writes each file (mode 0600) to a temporary name in dir and
// renames it into place: a reader never sees half a key.
func writeFiles(dir string, files map[string][]byte) error {
	for name, b := range files {
		f, err := os.CreateTemp(dir, "."+name+".*")
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, name))
		}
		if err != nil {
			os.Remove(f.Name())
			return err
		}
	}
	return nil
}
