package app

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"
)

// certReloader serves the HTTP listener's certificate and swaps it
// atomically on Reload: connections after a reload get the new one, the
// listener and open connections stay.
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the certificate and key files again; on error the current
// certificate stays.
func (r *certReloader) Reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&c)
	return nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
}
