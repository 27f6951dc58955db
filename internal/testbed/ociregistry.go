package testbed

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

// ociRegistryEnv, set to HOST:PORT, turns any program that links this package (the test binary,
// gradual-testbed) into the fleet's OCI registry: the Flux option starts its own executable again
// with it, so the registry needs no binary of its own and outlives the process that started it.
const ociRegistryEnv = "GRADUAL_TESTBED_OCI_REGISTRY"

func init() {
	if addr := os.Getenv(ociRegistryEnv); addr != "" {
		if err := ServeOCIRegistry(addr); err != nil {
			fmt.Fprintln(os.Stderr, "gradual-testbed OCI registry:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// ServeOCIRegistry serves go-containerregistry's in-memory registry (the OCI distribution API,
// plain HTTP) on addr until the process ends. Everything pushed lives in memory.
func ServeOCIRegistry(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	logger.Printf("OCI registry (go-containerregistry pkg/registry, in memory) serving on http://%s", l.Addr())
	s := &http.Server{Handler: registry.New(registry.Logger(logger)), ReadHeaderTimeout: 10 * time.Second}
	return s.Serve(l)
}

// AuthRegistry is an in-memory OCI registry served over TLS with a CA of its own, taking a
// username and password (basic auth) or a token (bearer): what the Flux engine's registry
// credentials and CA settings are tested against, from this process and from source-controller.
// It serves while the process that started it lives (a test), until Close.
type AuthRegistry struct {
	// Addr is 127.0.0.1:PORT.
	Addr string
	// CAPEM is the CA that signed the registry's serving certificate.
	CAPEM                     []byte
	Username, Password, Token string
	// Client, with RequireClientCerts, is the CA the registry verifies client certificates with
	// and a client certificate and key it signed: the TLS handshake fails without it.
	Client *servingcert.Client
	srv    *http.Server
}

// AuthRegistryOption changes how StartAuthRegistry serves.
type AuthRegistryOption func(*tls.Config, *AuthRegistry) error

// RequireClientCerts has the registry require a client certificate signed by a CA of its own
// (mutual TLS), kept in AuthRegistry.Client with a certificate and key that pass.
func RequireClientCerts() AuthRegistryOption {
	return func(cfg *tls.Config, r *AuthRegistry) error {
		client, err := servingcert.NewClient("gradual-testbed-oci-registry-client")
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(client.CAPEM)
		cfg.ClientAuth, cfg.ClientCAs, r.Client = tls.RequireAndVerifyClientCert, pool, client
		return nil
	}
}

// StartAuthRegistry serves an AuthRegistry on a free loopback port.
func StartAuthRegistry(username, password, token string, opts ...AuthRegistryOption) (*AuthRegistry, error) {
	pair, err := servingcert.New("gradual-testbed-oci-registry")
	if err != nil {
		return nil, err
	}
	r := &AuthRegistry{CAPEM: pair.CAPEM, Username: username, Password: password, Token: token}
	cfg := pair.ServerTLS()
	for _, opt := range opts {
		if err := opt(cfg, r); err != nil {
			return nil, err
		}
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return nil, err
	}
	r.Addr = l.Addr().String()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.allowed(req) {
			// The distribution spec's challenge: clients answer it with basic auth (or, given a
			// registry token, a bearer token).
			w.Header().Set("WWW-Authenticate", `Basic realm="gradual-testbed"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		inner.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// allowed reports whether req carries the registry's credentials.
func (r *AuthRegistry) allowed(req *http.Request) bool {
	if user, pass, ok := req.BasicAuth(); ok {
		return r.Username != "" && user == r.Username && pass == r.Password
	}
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	return ok && r.Token != "" && token == r.Token
}

// URL is the oci:// address of repository in the registry.
func (r *AuthRegistry) URL(repository string) string {
	return "oci://" + r.Addr + "/" + strings.TrimPrefix(repository, "/")
}

// Close stops serving.
func (r *AuthRegistry) Close() error { return r.srv.Close() }
