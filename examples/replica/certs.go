package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/raftlock/raftlock/internal/devcerts"
)

// certs writes a throw-away CA and one certificate per replica (valid for a
// day, with the DNS SAN "raftlock" so that every replica can use
// -tls-server-name raftlock whatever its address). For trying mutual TLS
// out; production certificates come from your own CA.
func certs(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("replica certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "certs", "output directory")
	names := fs.String("names", "r1,r2,r3", "comma-separated replica ids")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
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
