package fluxdelivery

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		repo string
		ok   bool
	}{
		{"oci://127.0.0.1:5000/gradual/web", true},
		{"oci://ghcr.io/org/fleet", true},
		{"https://ghcr.io/org/fleet", false},
		{"ghcr.io/org/fleet", false},
		{"oci://ghcr.io/org/fleet:v1", false},
		{"oci://ghcr.io/org/fleet@sha256:0123", false},
	} {
		err := Settings{Repository: tc.repo}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tc.repo, err, tc.ok)
		}
	}
}

func TestObjectNameIsALabelValue(t *testing.T) {
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: strings.Repeat("very-long-rollout-", 4)}
	a, b := ObjectName(key, strings.Repeat("cluster", 9)), ObjectName(key, strings.Repeat("cluster", 9)+"x")
	if len(a) > 63 || a == b {
		t.Fatalf("names %q and %q: want ≤ 63 characters (Flux labels what it applies with it) and distinct", a, b)
	}
}

const digest = "sha256:aaaa"

// kubeconfigMissing is kustomize-controller's Ready message when a Kustomization's
// kubeConfig.secretRef names a Secret that does not exist.
const kubeconfigMissing = `unable to read KubeConfig secret 'fleet/c1-kubeconfig' error: secrets "c1-kubeconfig" not found`

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    Status
		final bool
		want  error // nil: no verdict yet (or success)
	}{
		{"applied", Status{Exists: true, Ready: "True", Applied: "r1@" + digest}, true, nil},
		{"refused by the API server", Status{Exists: true, Ready: "False", Reason: "ReconciliationFailed", Attempted: "r1@" + digest,
			Message: `ConfigMap/x/settings dry-run failed (Invalid): ConfigMap "settings" is invalid`}, false, ErrRevisionFailed},
		{"health check failed", Status{Exists: true, Ready: "False", Reason: "HealthCheckFailed", Attempted: "r1@" + digest}, false, ErrRevisionFailed},
		{"workload unreachable, still retrying", Status{Exists: true, Ready: "False", Reason: "ReconciliationFailed", Attempted: "r1@" + digest,
			Message: "dial tcp 127.0.0.1:1: connection refused"}, false, nil},
		{"workload unreachable at the end", Status{Exists: true, Ready: "False", Reason: "ReconciliationFailed", Attempted: "r1@" + digest,
			Message: "dial tcp 127.0.0.1:1: connection refused"}, true, ErrInfrastructure},
		// The Cluster's kubeconfig Secret missing (the provider, reading no Secret in Flux mode,
		// judged the Cluster by its status): kustomize-controller's own failure, never the
		// revision's.
		{"kubeconfig Secret missing, still retrying", Status{Exists: true, Ready: "False", Reason: "ReconciliationFailed", Attempted: "r1@" + digest,
			Message: kubeconfigMissing}, false, nil},
		{"kubeconfig Secret missing at the end", Status{Exists: true, Ready: "False", Reason: "ReconciliationFailed", Attempted: "r1@" + digest,
			Message: kubeconfigMissing}, true, ErrInfrastructure},
		{"an older revision's failure", Status{Exists: true, Ready: "False", Reason: "HealthCheckFailed", Attempted: "r0@sha256:bbbb"}, false, nil},
		{"never attempted (source or controller down)", Status{Exists: true, Ready: "True", Applied: "r0@sha256:bbbb", Attempted: "r0@sha256:bbbb"}, true, ErrInfrastructure},
		{"attempted, failed and not ready in time", Status{Exists: true, Ready: "False", Reason: "DependencyNotReady", Attempted: "r1@" + digest}, true, ErrRevisionFailed},
		// kustomize-controller stopped mid-reconcile (its own timeout ends first, so a live
		// one would have given a verdict): infrastructure, never the revision.
		{"attempted, no verdict in time", Status{Exists: true, Ready: "Unknown", Reason: "Progressing", Attempted: "r1@" + digest}, true, ErrInfrastructure},
		{"attempted, no verdict yet", Status{Exists: true, Ready: "Unknown", Reason: "Progressing", Attempted: "r1@" + digest}, false, nil},
		{"suspended", Status{Exists: true, Suspended: true}, false, ErrInfrastructure},
		{"gone", Status{}, false, ErrInfrastructure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Classify(tc.st, digest, tc.final)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Classify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestKustomizationTimeout(t *testing.T) {
	for _, tc := range []struct{ verify, want time.Duration }{
		{10 * time.Second, 8 * time.Second},
		{90 * time.Second, 81 * time.Second},
		{30 * time.Minute, 29*time.Minute + 30*time.Second},
		{2 * time.Second, 2 * time.Second}, // too short for a margin
	} {
		if got := KustomizationTimeout(tc.verify); got != tc.want {
			t.Errorf("KustomizationTimeout(%s) = %s, want %s", tc.verify, got, tc.want)
		}
	}
}

// TestPublishIsContentAddressed publishes to go-containerregistry's in-memory registry (the test
// bed's): the same objects make the same digest, found again by tag, and another revision another.
func TestPublishIsContentAddressed(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/gradual/web"
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	ctx := context.Background()
	manifests := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n")
	first, err := New(nil, Settings{Repository: repo, Insecure: true}, key).Publish(ctx, "rev1", manifests)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, "sha256:") {
		t.Fatalf("digest %q", first)
	}
	// The same revision pushed to another repository, by a fresh Delivery, has the same digest;
	// a fresh Delivery of the first repository resolves the tag from the registry.
	again, err := New(nil, Settings{Repository: repo + "-copy", Insecure: true}, key).Publish(ctx, "rev1", manifests)
	if err != nil || again != first {
		t.Fatalf("the same content published again: %q, %v; want %q", again, err, first)
	}
	other := New(nil, Settings{Repository: repo, Insecure: true}, key)
	if got, err := other.Digest("rev1", manifests); err != nil || got != first {
		t.Fatalf("Digest(rev1) = %q, %v; want %q", got, err, first)
	}
	changed, err := other.Publish(ctx, "rev2", append(manifests, "data: {a: b}\n"...))
	if err != nil || changed == first {
		t.Fatalf("another revision: %q, %v; want a digest other than %q", changed, err, first)
	}
}

func TestCheckPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ok := Settings{Repository: "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/gradual/web", Insecure: true}
	if err := ok.CheckPush(context.Background()); err != nil {
		t.Fatalf("CheckPush to the in-memory registry: %v", err)
	}
	// Nothing listens on port 1 of the loopback address.
	down := Settings{Repository: "oci://127.0.0.1:1/gradual/web", Insecure: true}
	if err := down.CheckPush(context.Background()); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("CheckPush to a registry that is down: %v, want an error naming it", err)
	}
}

func TestInstalled(t *testing.T) {
	without := fake.NewClientBuilder().WithRESTMapper(meta.NewDefaultRESTMapper(nil)).Build()
	if err := Installed(without); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "OCIRepository") {
		t.Fatalf("Installed without Flux's kinds: %v, want ErrNotInstalled naming OCIRepository", err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(OCIRepositoryKind, meta.RESTScopeNamespace)
	if err := Installed(fake.NewClientBuilder().WithRESTMapper(mapper).Build()); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "Kustomization") {
		t.Fatalf("Installed with OCIRepository only: %v, want ErrNotInstalled naming Kustomization", err)
	}
	mapper.Add(KustomizationKind, meta.RESTScopeNamespace)
	if err := Installed(fake.NewClientBuilder().WithRESTMapper(mapper).Build()); err != nil {
		t.Fatalf("Installed with both kinds: %v", err)
	}
}

func TestSettingsValidateCredentialsAndCA(t *testing.T) {
	repo := "oci://registry.example/gradual/web"
	for _, tc := range []struct {
		name string
		s    Settings
		want string // "" when valid
	}{
		{"basic auth", Settings{Repository: repo, Credentials: Credentials{Username: "u", Password: "p"}}, ""},
		{"token", Settings{Repository: repo, Credentials: Credentials{Token: "t"}}, ""},
		{"token and password", Settings{Repository: repo, Credentials: Credentials{Username: "u", Password: "p", Token: "t"}}, "not both"},
		{"password alone", Settings{Repository: repo, Credentials: Credentials{Password: "p"}}, "needs its username"},
		{"CA bundle that is no PEM", Settings{Repository: repo, CABundle: "not a certificate"}, "no PEM certificate"},
		{"insecure with a CA", Settings{Repository: repo, Insecure: true, CertSecretRef: "registry-ca"}, "contradict"},
	} {
		err := tc.s.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestSettingsKeepNoCredentials: the settings are kept in the records (and so shown by import);
// the credentials never are.
func TestSettingsKeepNoCredentials(t *testing.T) {
	b, err := json.Marshal(Settings{Repository: "oci://r.example/x", SecretRef: "pull", ClientCertificate: "CERT",
		Credentials: Credentials{Username: "someone", Password: "hunter2", Token: "tok3n", ClientKey: "k3y"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"someone", "hunter2", "tok3n", "k3y"} {
		if strings.Contains(string(b), secret) {
			t.Fatalf("kept settings %s hold a credential", b)
		}
	}
	if !strings.Contains(string(b), `"secretRef":"pull"`) || !strings.Contains(string(b), `"clientCertificate":"CERT"`) {
		t.Fatalf("kept settings %s lack the secret reference", b)
	}
}

// TestCredentialsAndCA pushes to a registry over TLS with a CA of its own that takes basic auth
// or a token (the test bed's AuthRegistry): the right credentials and CA work; a wrong password,
// a missing CA or no credentials are refused, naming why.
func TestCredentialsAndCA(t *testing.T) {
	reg, err := testbed.StartAuthRegistry("fleet", "s3cret", "t0ken")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Close() }()
	ctx := context.Background()
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	manifests := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n")
	with := func(c Credentials, ca []byte) Settings {
		return Settings{Repository: reg.URL("gradual/web"), CABundle: string(ca), Credentials: c}
	}
	for _, s := range []Settings{with(Credentials{Username: "fleet", Password: "s3cret"}, reg.CAPEM), with(Credentials{Token: "t0ken"}, reg.CAPEM)} {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckPush(ctx); err != nil {
			t.Fatalf("CheckPush with the right credentials and CA: %v", err)
		}
		d := New(nil, s, key)
		dg, err := d.Publish(ctx, "rev1", manifests)
		if err != nil {
			t.Fatalf("Publish with the right credentials and CA: %v", err)
		}
		// A fresh Delivery finds the tag in the registry (read with the same credentials).
		if got, err := New(nil, s, key).Publish(ctx, "rev1", manifests); err != nil || got != dg {
			t.Fatalf("Publish(rev1) again = %q, %v; want %q", got, err, dg)
		}
	}
	for _, tc := range []struct {
		name string
		s    Settings
		want string
	}{
		{"wrong password", with(Credentials{Username: "fleet", Password: "wrong"}, reg.CAPEM), "unauthorized"},
		{"wrong token", with(Credentials{Token: "wrong"}, reg.CAPEM), "unauthorized"},
		{"no CA", with(Credentials{Username: "fleet", Password: "s3cret"}, nil), "certificate"},
	} {
		err := tc.s.CheckPush(ctx)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want) {
			t.Errorf("%s: CheckPush = %v, want an error with %q", tc.name, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken")) {
			t.Errorf("%s: the error repeats a credential: %v", tc.name, err)
		}
		if _, err := New(nil, tc.s, key).Publish(ctx, "rev2", manifests); err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want) {
			t.Errorf("%s: Publish = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestClientCertificates pushes to a registry that requires client certificates (the test bed's
// AuthRegistry with RequireClientCerts, over its own CA, with basic auth): the right certificate
// and key work; no certificate, or one signed by another CA, are refused by the handshake,
// and no error repeats the key.
func TestClientCertificates(t *testing.T) {
	reg, err := testbed.StartAuthRegistry("fleet", "s3cret", "", testbed.RequireClientCerts())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Close() }()
	other, err := servingcert.NewClient("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	manifests := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n")
	with := func(crt, key []byte) Settings {
		return Settings{Repository: reg.URL("gradual/web"), CABundle: string(reg.CAPEM), ClientCertificate: string(crt),
			Credentials: Credentials{Username: "fleet", Password: "s3cret", ClientKey: string(key)}}
	}
	right := with(reg.Client.CertPEM, reg.Client.KeyPEM)
	if err := right.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := right.CheckPush(ctx); err != nil {
		t.Fatalf("CheckPush with the right client certificate: %v", err)
	}
	dg, err := New(nil, right, key).Publish(ctx, "rev1", manifests)
	if err != nil {
		t.Fatalf("Publish with the right client certificate: %v", err)
	}
	if got, err := New(nil, right, key).Publish(ctx, "rev1", manifests); err != nil || got != dg {
		t.Fatalf("Publish(rev1) again = %q, %v; want %q", got, err, dg)
	}
	for _, tc := range []struct {
		name string
		s    Settings
	}{
		{"no client certificate", with(nil, nil)},
		{"a client certificate of another CA", with(other.CertPEM, other.KeyPEM)},
	} {
		if err := tc.s.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v (the settings are well formed; the registry refuses them)", tc.name, err)
		}
		err := tc.s.CheckPush(ctx)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: CheckPush = %v, want the handshake refused", tc.name, err)
		}
		if _, err := New(nil, tc.s, key).Publish(ctx, "rev2", manifests); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: Publish = %v, want the handshake refused", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error repeats the key: %v", tc.name, err)
		}
	}
}

// TestValidateClient: a client certificate and key are both given or neither, each PEM, and the
// key is the certificate's; each problem names its attribute, never quoting the key.
func TestValidateClient(t *testing.T) {
	a, err := servingcert.NewClient("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := servingcert.NewClient("b")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, crt, key string
		attr, want     string // "" when valid
	}{
		{"neither", "", "", "", ""},
		{"a pair", string(a.CertPEM), string(a.KeyPEM), "", ""},
		{"certificate alone", string(a.CertPEM), "", "client_key", "needs its client_key"},
		{"key alone", "", string(a.KeyPEM), "client_certificate", "needs its client_certificate"},
		{"no PEM certificate", "not a certificate", string(a.KeyPEM), "client_certificate", "no PEM certificate"},
		{"a key for a certificate", string(a.KeyPEM), string(a.KeyPEM), "client_certificate", "no PEM certificate"},
		{"no PEM key", string(a.CertPEM), "not a key", "client_key", "no PEM private key"},
		{"another certificate's key", string(a.CertPEM), string(b.KeyPEM), "client_key", "not the key of client_certificate"},
	} {
		s := Settings{Repository: "oci://registry.example/gradual/web", ClientCertificate: tc.crt, Credentials: Credentials{ClientKey: tc.key}}
		attr, err := s.ValidateClient()
		if attr != tc.attr || tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: ValidateClient() = %q, %v; want %q, %q", tc.name, attr, err, tc.attr, tc.want)
		}
		// A certificate without its key is what the state holds (the key is write-only): Validate
		// takes it, for the runs that push nothing; ValidateClient is the plan's check.
		if verr := s.Validate(); (verr != nil) != (tc.want != "" && tc.name != "certificate alone") {
			t.Errorf("%s: Validate() = %v, want an error: %t", tc.name, verr, tc.want != "")
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes the key: %v", tc.name, err)
		}
	}
	// Expiry is judged by the clock ValidateClient reads: the same pair, expired by then.
	blk, _ := pem.Decode(a.CertPEM)
	crt, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pair := Settings{Repository: "oci://registry.example/gradual/web", ClientCertificate: string(a.CertPEM), Credentials: Credentials{ClientKey: string(a.KeyPEM)}}
	if attr, err := pair.validateClientAt(crt.NotAfter); attr != "" || err != nil {
		t.Errorf("at its last valid instant: %q, %v", attr, err)
	}
	if attr, err := pair.validateClientAt(crt.NotAfter.Add(time.Second)); attr != "client_certificate" || err == nil || !strings.Contains(err.Error(), "expired on") {
		t.Errorf("once expired: %q, %v; want client_certificate expired", attr, err)
	}
	insecure := Settings{Repository: "oci://registry.example/gradual/web", Insecure: true, ClientCertificate: string(a.CertPEM), Credentials: Credentials{ClientKey: string(a.KeyPEM)}}
	if err := insecure.Validate(); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("insecure with a client certificate: Validate() = %v, want them refused together", err)
	}
}

func TestDrift(t *testing.T) {
	const pinned = "sha256:aaa"
	for _, tc := range []struct {
		name   string
		st     Status
		source bool
		want   string // a part of the drift; "" for none
	}{
		{"on the pin", Status{Exists: true, Ready: "True", Applied: "rev@" + pinned}, true, ""},
		{"reconciling", Status{Exists: true, Ready: "Unknown", Applied: "rev@sha256:old"}, true, ""},
		{"Kustomization deleted", Status{}, true, "Kustomization is gone"},
		{"OCIRepository deleted", Status{Exists: true, Ready: "True", Applied: pinned}, false, "OCIRepository is gone"},
		{"not ready", Status{Exists: true, Ready: "False", Reason: "ReconciliationFailed", Message: "apply failed\nline two"}, true, "not ready (ReconciliationFailed): apply failed"},
		{"ready on another digest", Status{Exists: true, Ready: "True", Applied: "rev@sha256:bbb"}, true, "not the pinned sha256:aaa"},
	} {
		got := Drift(tc.st, pinned, tc.source)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) || strings.Contains(got, "line two") {
			t.Errorf("%s: Drift = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStatusAsOf: a status about an older generation than the one a pin wrote (a watch event
// from before it) says nothing of the pin: Ready reads Unknown, even on the same digest.
func TestStatusAsOf(t *testing.T) {
	st := Status{Exists: true, Ready: "True", Reason: "ReconciliationSucceeded", Applied: "r1@sha256:aa", Generation: 3}
	if got := st.AsOf(3); got != st {
		t.Errorf("AsOf its own generation: %+v, want it unchanged", got)
	}
	if got := st.AsOf(4); got.Ready != "Unknown" || got.On("sha256:aa") {
		t.Errorf("AsOf a later generation: %+v, want Ready Unknown and not on the digest", got)
	}
	if got := (Status{}).AsOf(4); got.Exists || got.Ready != "" {
		t.Errorf("AsOf on a Kustomization that does not exist: %+v, want it unchanged", got)
	}
}
