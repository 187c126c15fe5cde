package hubtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority a test makes, to serve the hub over TLS to
// clients that trust it and nothing else.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// Pool trusts the CA alone; CertFile is its certificate as PEM, for
	// clients outside the test process (NODE_EXTRA_CA_CERTS, curl --cacert).
	Pool     *x509.CertPool
	CertFile string
}

// NewCA makes a CA valid for the test's life, its certificate written
// under the test's temporary directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "crewlet test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, Pool: x509.NewCertPool(), CertFile: filepath.Join(t.TempDir(), "ca.pem")}
	ca.Pool.AddCert(cert)
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Issue writes a server certificate for localhost, the loopback addresses
// and any further DNS names given (a name only a test's proxy resolves),
// with the given serial number (a test tells two issued pairs apart by it),
// to certFile and keyFile.
func (ca *CA) Issue(t testing.TB, serial int64, certFile, keyFile string, names ...string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "crewlet hub"},
		DNSNames:     append([]string{"localhost"}, names...),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
}

// Client is an HTTP client that trusts the CA alone and speaks HTTP/2
// where the server offers it, sending token as a bearer credential when
// it is not empty.
func (ca *CA) Client(token string) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}
	if token == "" {
		return &http.Client{Transport: tr}
	}
	return &http.Client{Transport: Bearer{Token: token, Base: tr}}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SPKIPin is the base64 SHA-256 of the public key in a PEM certificate
// file: what chromium's --ignore-certificate-errors-spki-list trusts, so a
// browser accepts that one certificate and no other.
func SPKIPin(t testing.TB, certFile string) string {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}
