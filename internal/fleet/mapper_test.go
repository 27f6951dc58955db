package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func testCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Clusters behind one API server share a mapper; another server, or the same URL vouched for by
// another CA, gets its own.
func TestRESTMapperPerServer(t *testing.T) {
	m := &Management{}
	caA, caX := testCA(t, "a"), testCA(t, "x")
	get := func(cfg *rest.Config) any {
		t.Helper()
		mapper, err := m.RESTMapper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return mapper
	}
	a1 := get(&rest.Config{Host: "https://a.example:6443", BearerToken: "one", TLSClientConfig: rest.TLSClientConfig{CAData: caA}})
	a2 := get(&rest.Config{Host: "https://a.example:6443", BearerToken: "two", TLSClientConfig: rest.TLSClientConfig{CAData: caA}})
	otherCA := get(&rest.Config{Host: "https://a.example:6443", BearerToken: "one", TLSClientConfig: rest.TLSClientConfig{CAData: caX}})
	b := get(&rest.Config{Host: "https://b.example:6443", BearerToken: "one", TLSClientConfig: rest.TLSClientConfig{CAData: caA}})
	if a1 != a2 {
		t.Error("two Clusters of one API server got different mappers")
	}
	if a1 == otherCA || a1 == b {
		t.Error("different API servers share a mapper")
	}
}
