package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// writeCert writes a self-signed ECDSA certificate for 127.0.0.1 with the
// given serial to certFile and keyFile, and returns it.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "jetgate-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHTTPSAndReload (issue 20: TLS for the HTTP listener, reload on
// SIGHUP): jetgate serves HTTPS with the configured certificate; after the
// files change and ReloadTLS (what SIGHUP calls), a new connection gets
// the new certificate on the same listener; a broken file keeps the
// current one.
func TestHTTPSAndReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := writeCert(t, certFile, keyFile, 1)
	s := startApp(t, app.Config{TLSCert: certFile, TLSKey: keyFile})
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s, want https", s.URL())
	}
	served := func(trust *x509.Certificate) *x509.Certificate {
		t.Helper()
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		defer c.CloseIdleConnections()
		res, err := c.Get(s.URL() + "/health")
		if err != nil {
			t.Fatalf("GET /health over TLS: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.TLS == nil {
			t.Fatalf("GET /health: %d, TLS %v", res.StatusCode, res.TLS != nil)
		}
		return res.TLS.PeerCertificates[0]
	}
	if got := served(first); got.SerialNumber.Int64() != 1 {
		t.Fatalf("served serial %v, want 1", got.SerialNumber)
	}
	// Plain HTTP on the TLS listener is refused (no cleartext API).
	if res, err := http.Get("http://" + s.HTTPAddr() + "/health"); err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Fatal("plain HTTP served on the TLS listener")
		}
	}

	second := writeCert(t, certFile, keyFile, 2)
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := served(second); got.SerialNumber.Int64() != 2 {
		t.Fatalf("after reload served serial %v, want 2", got.SerialNumber)
	}

	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS accepted a broken certificate file")
	}
	if got := served(second); got.SerialNumber.Int64() != 2 {
		t.Fatalf("after a failed reload served serial %v, want 2 still", got.SerialNumber)
	}
}

// TestTLSFlagsGoTogether: a certificate without its key (or a key without
// a certificate) is a start error, never a silent plain-HTTP listener.
func TestTLSFlagsGoTogether(t *testing.T) {
	t.Parallel()
	for _, cfg := range []app.Config{{TLSCert: "/c.pem"}, {TLSKey: "/k.pem"}} {
		cfg.DataDir, cfg.HTTPAddr, cfg.NatsAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
		if _, err := app.Start(t.Context(), cfg, nil); err == nil || !strings.Contains(err.Error(), "--tls-cert and --tls-key") {
			t.Errorf("cert %q key %q: err %v, want one naming both flags", cfg.TLSCert, cfg.TLSKey, err)
		}
	}
}
