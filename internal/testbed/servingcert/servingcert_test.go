package servingcert

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The serving certificate is valid for https://127.0.0.1 under the returned CA, and only there.
func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	pair, err := New("test")
	if err != nil {
		t.Fatal(err)
	}
	if err := pair.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	caPEM := pair.CAPEM
	if st, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(srv.URL) // https://127.0.0.1:PORT
	if err != nil {
		t.Fatalf("TLS to %s with the returned CA: %v", srv.URL, err)
	}
	_ = resp.Body.Close()

	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"}); err == nil {
		t.Error("serving certificate verifies for example.com; want the loopback addresses and localhost only")
	}
	if !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("IP SANs %v", leaf.IPAddresses)
	}
	if strings.Contains(string(caPEM), "PRIVATE KEY") {
		t.Error("CA bundle holds a private key")
	}
}
