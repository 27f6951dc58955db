// Package servingcert makes the throwaway TLS material of the test bed's local servers (the
// Cluster API webhooks, the reference update extension): a CA and a serving certificate it
// signed for the loopback addresses. The CA key is dropped as soon as the certificate is signed,
// so nothing else can ever be signed with it; callers get only the CA certificate, for caBundle
// fields and client trust.
package servingcert

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
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// validity is how long the certificates are valid: longer than any test bed lives.
const validity = 7 * 24 * time.Hour

// Pair is a CA certificate and a serving certificate it signed, with the serving key.
type Pair struct {
	// CAPEM is the CA certificate, PEM-encoded.
	CAPEM []byte
	// Server is the serving certificate and its private key.
	Server tls.Certificate
}

// New makes a CA named name and a serving certificate signed by it for 127.0.0.1, ::1,
// localhost and hosts (IP addresses or DNS names).
func New(name string, hosts ...string) (*Pair, error) {
	der, key, caPEM, err := signed(name, "serving", x509.ExtKeyUsageServerAuth, func(tmpl *x509.Certificate) {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return &Pair{CAPEM: caPEM, Server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}, nil
}

// signed makes a CA named name and a certificate named name that it signs for usage (what
// names it in errors), shaped further by edit: the certificate's DER, its key and the CA's PEM.
// The CA key is dropped once the certificate is signed.
func signed(name, what string, usage x509.ExtKeyUsage, edit func(*x509.Certificate)) ([]byte, *ecdsa.PrivateKey, []byte, error) {
	now := clock.System{}.Now()
	ca, caKey, caPEM, err := newCA(name)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: sign the %s certificate: %w", name, what, err)
	}
	return der, key, caPEM, nil
}

// newCA makes a self-signed CA named name: its certificate (parsed and PEM) and key.
func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	now := clock.System{}.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name + " CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: sign the CA certificate: %w", name, err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	return ca, caKey, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// Client is a CA certificate and a client certificate it signed (TLS client authentication),
// with the client's key, all PEM-encoded: what a server requiring client certificates trusts
// (CAPEM) and what a client presents (CertPEM, KeyPEM).
type Client struct {
	CAPEM, CertPEM, KeyPEM []byte
}

// NewClient makes a CA named name and a client certificate signed by it, for a server that
// requires client certificates. As with New, the CA key is dropped once the certificate is
// signed.
func NewClient(name string) (*Client, error) {
	der, key, caPEM, err := signed(name, "client", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Client{
		CAPEM:   caPEM,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ServerTLS is a server configuration serving the certificate, TLS 1.2 or later.
func (p *Pair) ServerTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Server}}
}

// WriteFiles writes the serving certificate and key as tls.crt and tls.key (the names
// controller-runtime's webhook server and CAPI's runtime extension server read from
// --webhook-cert-dir) into dir; the key is readable by its owner only.
func (p *Pair) WriteFiles(dir string) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(p.Server.PrivateKey)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Server.Certificate[0]})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
