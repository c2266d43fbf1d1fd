package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CA is a certificate authority made for one test, with a server
// certificate it signed for 127.0.0.1 and localhost. The files are PEM.
type CA struct {
	CAFile   string // the CA certificate
	CertFile string // the server certificate
	KeyFile  string // the server's private key
	Pool     *x509.CertPool
}

// NewCA makes a fresh ECDSA P-256 CA and a server certificate for
// 127.0.0.1 and localhost in dir.
func NewCA(dir string) (*CA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redlock test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "redis-server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	ca := &CA{
		CAFile:   filepath.Join(dir, "ca.crt"),
		CertFile: filepath.Join(dir, "server.crt"),
		KeyFile:  filepath.Join(dir, "server.key"),
		Pool:     x509.NewCertPool(),
	}
	ca.Pool.AddCert(caCert)
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{ca.CAFile, "CERTIFICATE", caDER}, {ca.CertFile, "CERTIFICATE", der}, {ca.KeyFile, "PRIVATE KEY", keyDER}} {
		b := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(f.path, b, 0o600); err != nil {
			return nil, err
		}
	}
	return ca, nil
}

// NewCAT is NewCA in a temporary directory of the test.
func NewCAT(t testing.TB) *CA {
	t.Helper()
	ca, err := NewCA(t.TempDir())
	if err != nil {
		t.Fatalf("harness: make CA: %v", err)
	}
	return ca
}

// TLSConfig returns a client configuration that trusts only this CA.
func (ca *CA) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
}

// StartTLS starts a redis-server that listens on a TLS port only (--port 0)
// with ca's server certificate, and does not ask clients for certificates
// (--tls-auth-clients no). Server.Client and Server.Options trust ca. It is
// stopped when the test ends.
func StartTLS(t testing.TB, ca *CA) *Server {
	t.Helper()
	return startServerT(t, serverSpec{
		ports: 1,
		args: func(dir string, p []int) ([]string, error) {
			return append(baseArgs(dir), "--port", "0", "--tls-port", strconv.Itoa(p[0]),
				"--tls-cert-file", ca.CertFile, "--tls-key-file", ca.KeyFile,
				"--tls-ca-cert-file", ca.CAFile, "--tls-auth-clients", "no"), nil
		},
		opts: func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, TLSConfig: ca.TLSConfig()}
		},
	})
}

// URL returns the server's URL: rediss:// for a TLS server.
func (s *Server) URL() string {
	if s.opts.TLSConfig != nil {
		return "rediss://" + s.Addr
	}
	return "redis://" + s.Addr
}

// String names the server for test messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }
