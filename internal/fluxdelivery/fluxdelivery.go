// Package fluxdelivery delivers revisions through Flux instead of applying them from this
// process: each revision is published as an OCI artifact (Flux's own client library and media
// types; tag = revision, pinned by digest), and in the management cluster, beside each Cluster,
// a Kustomization per (rollout, cluster) has Flux's kustomize-controller apply it to the workload
// cluster through the Cluster's kubeconfig Secret, from an OCIRepository per artifact that every
// Kustomization of the namespace on that artifact shares. It reads and writes
// the management cluster and the registry only: it never reads a kubeconfig Secret nor
// connects to a workload cluster. Flux objects are handled unstructured, so the module does
// not take Flux's API modules (they would move the pinned Kubernetes libraries).
package fluxdelivery

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/sopsenc"
)

// The Flux APIs the engine writes (Flux v2.x: source-controller and kustomize-controller v1).
var (
	OCIRepositoryKind = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}
	KustomizationKind = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

// Labels and annotations on the Flux objects, so that they name the rollout and cluster they
// serve (and a destroy finds them by label).
const (
	LabelCluster = "gradual.dev/cluster"
	// LabelSource, on a Kustomization, is the name of the OCIRepository it applies (SourceName):
	// a removal asks by it whether another Kustomization still names that source.
	LabelSource = "gradual.dev/source"
	// annotationClusterName is the cluster's name whole (LabelCluster is cut to a label's length).
	annotationClusterName = "gradual.dev/cluster-name"
	// fieldOwner is the server-side apply field manager of the Flux objects.
	fieldOwner = "gradual-flux"
	// ControllerFieldManager is the field manager kustomize-controller applies a Kustomization's
	// objects to the workload cluster with.
	ControllerFieldManager = "kustomize-controller"
	// artifactFile is the one file of each artifact: the revision's objects as YAML.
	artifactFile = "manifests.yaml"
	// created is every artifact's creation stamp: fixed, so that the same revision always has
	// the same digest (content-addressed), whenever and by whomever it is published.
	created = "1970-01-01T00:00:00Z"
)

// Settings say where revisions are published and how Flux reaches them.
type Settings struct {
	// Repository is the OCI repository, "oci://host[:port]/path"; each revision is a tag of it.
	Repository string `json:"repository"`
	// Insecure reaches the registry over plain HTTP (both this process and source-controller).
	Insecure bool `json:"insecure,omitempty"`
	// CABundle is PEM: the certificate authorities this process trusts for the registry, beside
	// the system's. It is public, so it is kept with the rest.
	CABundle string `json:"caBundle,omitempty"`
	// SecretRef names, in each Cluster's namespace, the Secret source-controller pulls with
	// (kubernetes.io/dockerconfigjson): the OCIRepository's spec.secretRef. The provider never
	// reads or writes it (the runner may have no rights on Secrets there).
	SecretRef string `json:"secretRef,omitempty"`
	// CertSecretRef names, in each Cluster's namespace, the Secret holding the CA (ca.crt)
	// source-controller trusts for the registry, and its client certificate and key (tls.crt,
	// tls.key) for a registry requiring them: the OCIRepository's spec.certSecretRef.
	CertSecretRef string `json:"certSecretRef,omitempty"`
	// ClientCertificate is PEM: the certificate this process presents to a registry that
	// requires client certificates (mutual TLS), with Credentials.ClientKey. A certificate is
	// public, so it is kept with the rest; its key is not.
	ClientCertificate string `json:"clientCertificate,omitempty"`
	// Decryption, when set, publishes the objects of sensitive_manifests SOPS-encrypted to an
	// age recipient, and has each Kustomization decrypt them (spec.decryption). Public: a
	// recipient and a Secret's name.
	Decryption *Decryption `json:"decryption,omitempty"`
	// Credentials are what this process pushes with. They are never kept (records, state): the
	// configuration gives them again on each run.
	Credentials Credentials `json:"-"`
}

// Decryption is how Flux decrypts what the artifact holds encrypted (internal/sopsenc).
type Decryption struct {
	// AgeRecipient is the age X25519 recipient ("age1…") the objects are encrypted to.
	AgeRecipient string `json:"ageRecipient"`
	// SecretName names, in each Cluster's namespace, the Secret holding the recipient's private
	// key (data key "<any name>.agekey"): the Kustomization's spec.decryption.secretRef. The user
	// keeps it there; the provider never reads or writes it.
	SecretName string `json:"secretName"`
}

// Credentials authenticate this process to the registry: a token, or a username and password;
// neither means Docker's config (DOCKER_CONFIG or ~/.docker/config.json, and its credential
// helpers), as `docker push` and `flux push artifact` use. ClientKey is the PEM private key of
// Settings.ClientCertificate (TLS client authentication, beside any of those).
type Credentials struct {
	Username, Password, Token string
	ClientKey                 string
}

// artifactFormat names how Manifests lays out an artifact; it is part of every revision
// (RevisionSettings), so that an artifact laid out otherwise is published under another tag and
// never meets one of an older layout under the same tag (which apply would refuse as a tag
// holding other content). 2: objects Flux must not prune carry Flux's prune opt-out (keptByFlux).
const artifactFormat = "2"

// RevisionSettings is what of the settings changes what a cluster's Flux objects say beyond the
// objects: where the artifact is (the repository, and whether it is reached without TLS), the
// Secrets source-controller pulls with, and the artifact's layout. It is part of the revision,
// so that a change of any of them is carried to the clusters in waves, re-pinning each to the same
// content at its new source, like any other change: never a replacement, which would delete
// every Kustomization and have Flux prune the fleet.
func (s Settings) RevisionSettings() []byte {
	out := fmt.Sprintf("flux-source:repository=%s,insecure=%t,format=%s", s.Repository, s.Insecure, artifactFormat)
	if s.SecretRef != "" || s.CertSecretRef != "" {
		out += "\nflux-pull:secretRef=" + s.SecretRef + ",certSecretRef=" + s.CertSecretRef
	}
	// The recipient changes the artifact's ciphertext (so its digest), the Secret the
	// Kustomizations decrypt with: both carried to the clusters in waves.
	if s.Decryption != nil {
		out += "\nflux-decryption:ageRecipient=" + s.Decryption.AgeRecipient + ",secretName=" + s.Decryption.SecretName
	}
	return []byte(out)
}

// keychain is what this process pushes and resolves with.
func (s Settings) keychain() authn.Keychain {
	c := s.Credentials
	switch {
	case c.Token != "":
		// A registry token is sent as a bearer token (the docker config's "registrytoken").
		return staticKeychain{authn.FromConfig(authn.AuthConfig{RegistryToken: c.Token})}
	case c.Username != "" || c.Password != "":
		return staticKeychain{authn.FromConfig(authn.AuthConfig{Username: c.Username, Password: c.Password})}
	}
	return authn.DefaultKeychain
}

// staticKeychain answers every registry with one authenticator: the settings name one
// repository, so one registry.
type staticKeychain struct{ auth authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

// transport is the HTTP transport to the registry: go-containerregistry's default, trusting
// CABundle too and presenting the client certificate when there is one.
func (s Settings) transport() (http.RoundTripper, error) {
	if s.CABundle == "" && s.ClientCertificate == "" && s.Credentials.ClientKey == "" {
		return remote.DefaultTransport, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CABundle != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(s.CABundle)) {
			return nil, errors.New("ca_bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if s.withoutKey() {
		// Refresh, import and destroy read the settings from the state, which never holds the
		// key: they push nothing, so they need no client certificate.
	} else if _, err := s.ValidateClient(); err != nil {
		return nil, err
	} else if s.ClientCertificate != "" {
		pair, err := tls.X509KeyPair([]byte(s.ClientCertificate), []byte(s.Credentials.ClientKey))
		if err != nil {
			return nil, err // ValidateClient parsed them already
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	base, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("go-containerregistry's default transport is not an *http.Transport")
	}
	t := base.Clone()
	t.TLSClientConfig = cfg
	return t, nil
}

// withoutKey says whether the settings hold a client certificate without its key: what the state
// holds between runs (the key is write-only), valid, but never used to push.
func (s Settings) withoutKey() bool {
	return s.ClientCertificate != "" && s.Credentials.ClientKey == ""
}

// ValidateClient reports a client certificate and key that cannot be used, with the attribute it
// is about (client_certificate or client_key): both or neither, each PEM, the key the
// certificate's. The words never quote the key.
func (s Settings) ValidateClient() (attribute string, err error) {
	return s.validateClientAt(clock.System{}.Now())
}

// validateClientAt is ValidateClient with the certificate's expiry judged at now.
func (s Settings) validateClientAt(now time.Time) (attribute string, err error) {
	crt, key := s.ClientCertificate, s.Credentials.ClientKey
	switch {
	case crt == "" && key == "":
		return "", nil
	case key == "":
		return "client_key", errors.New("client_certificate needs its client_key")
	case crt == "":
		return "client_certificate", errors.New("client_key needs its client_certificate")
	}
	if b, _ := pem.Decode([]byte(crt)); b == nil || b.Type != "CERTIFICATE" {
		return "client_certificate", errors.New("client_certificate holds no PEM certificate")
	} else if c, err := x509.ParseCertificate(b.Bytes); err != nil {
		return "client_certificate", fmt.Errorf("client_certificate: %w", err)
	} else if now.After(c.NotAfter) {
		return "client_certificate", fmt.Errorf("client_certificate expired on %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	if b, _ := pem.Decode([]byte(key)); b == nil || !strings.HasSuffix(b.Type, "PRIVATE KEY") {
		return "client_key", errors.New("client_key holds no PEM private key")
	}
	if _, err := tls.X509KeyPair([]byte(crt), []byte(key)); err != nil {
		// crypto/tls says "private key does not match public key" or why the key does not
		// parse, never the key itself.
		return "client_key", fmt.Errorf("client_key is not the key of client_certificate: %w", err)
	}
	return "", nil
}

// Validate reports settings that cannot be used, in words for the person configuring them.
func (s Settings) Validate() error {
	if s.Decryption != nil {
		if _, err := sopsenc.ParseRecipient(s.Decryption.AgeRecipient); err != nil {
			return fmt.Errorf("decryption.age_recipient %q: %w", s.Decryption.AgeRecipient, err)
		}
	}
	if !strings.HasPrefix(s.Repository, oci.OCIRepositoryPrefix) {
		return fmt.Errorf("repository %q must start with %s: revisions are published as OCI artifacts", s.Repository, oci.OCIRepositoryPrefix)
	}
	if _, err := name.NewRepository(strings.TrimPrefix(s.Repository, oci.OCIRepositoryPrefix)); err != nil {
		return fmt.Errorf("repository %q: %w (name a repository, without a tag or digest: each revision is its own tag)", s.Repository, err)
	}
	if s.Credentials.Token != "" && (s.Credentials.Username != "" || s.Credentials.Password != "") {
		return errors.New("give either a token or a username and password, not both")
	}
	if s.Credentials.Password != "" && s.Credentials.Username == "" {
		return errors.New("a password needs its username")
	}
	if _, err := s.transport(); err != nil {
		return err
	}
	if s.Insecure && (s.CABundle != "" || s.CertSecretRef != "" || s.ClientCertificate != "") {
		return errors.New("insecure (plain HTTP) and TLS settings (ca_bundle, cert_secret_ref, client_certificate) contradict each other")
	}
	return nil
}

// pushCheckTimeout bounds CheckPush: a registry that does not answer in that time is unusable.
const pushCheckTimeout = 15 * time.Second

// CheckPush checks, without writing an artifact, that this process can push to the repository:
// the registry answers and takes its credentials (an upload is started and cancelled).
func (s Settings) CheckPush(ctx context.Context) error {
	var opts []name.Option
	if s.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(strings.TrimPrefix(s.Repository, oci.OCIRepositoryPrefix), opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pushCheckTimeout)
	defer cancel()
	// CheckPushPermission takes no context; every request it makes gets ctx through the transport.
	base, err := s.transport()
	if err != nil {
		return err
	}
	rt := roundTripper(func(r *http.Request) (*http.Response, error) {
		return base.RoundTrip(r.WithContext(ctx))
	})
	if err := remote.CheckPushPermission(repo.Tag("gradual-push-check"), s.keychain(), rt); err != nil {
		return fmt.Errorf("push to %s: %w", s.Repository, err)
	}
	return nil
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Delivery is the Flux side of one rollout's delivery: publishing, pinning, reading readiness
// and removing, in the management cluster and the registry.
type Delivery struct {
	mgmt     client.Client
	settings Settings
	key      records.Key
	oci      *oci.Client

	mu      sync.Mutex
	digests map[string]string // revision → "sha256:…", once published or resolved

	// kustomize shapes the Kustomizations beyond the revision (WithKustomize; kustomize.go).
	kustomize Kustomize
}

// New returns the Flux delivery of key through mgmt (the management cluster's client).
// Settings that passed Validate are assumed.
func New(mgmt client.Client, settings Settings, key records.Key) *Delivery {
	opts := append(oci.DefaultOptions(), crane.WithAuthFromKeychain(settings.keychain()))
	if settings.Insecure {
		opts = append(opts, crane.Insecure)
	}
	if t, err := settings.transport(); err == nil && t != remote.DefaultTransport {
		opts = append(opts, crane.WithTransport(t))
	}
	return &Delivery{mgmt: mgmt, settings: settings, key: key, oci: oci.NewClient(opts), digests: map[string]string{}}
}

// Key is the rollout (or module of an assignment) d delivers.
func (d *Delivery) Key() records.Key { return d.key }

// ErrNotInstalled is returned by Installed when the management cluster lacks Flux's CRDs.
var ErrNotInstalled = errors.New("flux is not installed in the management cluster")

// Installed checks that the management cluster serves the Flux kinds the engine writes.
func Installed(mgmt client.Client) error {
	for _, gvk := range []schema.GroupVersionKind{OCIRepositoryKind, KustomizationKind} {
		if _, err := mgmt.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return fmt.Errorf("%w: it does not serve %s (%s); install Flux's source-controller and kustomize-controller (their CRDs) first",
					ErrNotInstalled, gvk.Kind, gvk.GroupVersion())
			}
			return fmt.Errorf("look up %s in the management cluster: %w", gvk.Kind, err)
		}
	}
	return nil
}

// artifactRef is the registry reference of revision's artifact ("host/path:revision").
func (d *Delivery) artifactRef(revision string) string {
	return strings.TrimPrefix(d.settings.Repository, oci.OCIRepositoryPrefix) + ":" + revision
}

// Publish makes sure the registry holds revision's artifact (its objects as YAML) under the tag
// revision, and returns the digest ("sha256:…") to pin: ArtifactDigest of the planned content,
// computed before anything is pushed. A tag that does not exist yet is pushed. A tag that exists
// is trusted only for what it holds: the planned artifact itself, or (published by an earlier
// version of the provider) an artifact holding exactly the planned objects, whose digest is then
// returned. A tag holding other content is refused with ErrTagHoldsOther, naming the
// repository, the tag and both digests: nothing is pushed over it, and nothing is to be pinned.
func (d *Delivery) Publish(ctx context.Context, revision string, manifests []byte) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock() // waves publish once per revision, not once per cluster
	if dg, ok := d.digests[revision]; ok {
		return dg, nil
	}
	img, err := buildArtifact(revision, manifests)
	if err != nil {
		return "", fmt.Errorf("publish revision %s: %w", revision, err)
	}
	h, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("publish revision %s: %w", revision, err)
	}
	want := h.String()
	have, found, err := d.check(ctx, revision, want, manifests)
	switch {
	case err != nil:
		return "", err
	case found:
		d.digests[revision] = have
		return have, nil
	}
	// Not found (or not told: a registry that refuses to say pushes or refuses the push too).
	if err := crane.Push(img, d.artifactRef(revision), append(d.oci.GetOptions(), crane.WithContext(ctx))...); err != nil {
		return "", fmt.Errorf("publish revision %s to %s: %w", revision, d.settings.Repository, err)
	}
	d.digests[revision] = want
	return want, nil
}

// Check refuses, as Publish would, a tag of revision that holds other content than manifests
// (ErrTagHoldsOther), without pushing anything: what apply asks before it takes the Lease and
// pins any cluster. A tag that does not exist, or that the registry does not say, is no refusal.
func (d *Delivery) Check(ctx context.Context, revision string, manifests []byte) error {
	want, err := ArtifactDigest(revision, manifests)
	if err != nil {
		return err
	}
	_, _, err = d.check(ctx, revision, want, manifests)
	return err
}

// check reads the tag revision: found and the digest to pin when it holds the planned artifact
// (want) or the planned content in other bytes; ErrTagHoldsOther when it holds other content;
// not found when it does not exist or the registry does not say (Publish then pushes, and the
// registry refuses the push too or takes it).
func (d *Delivery) check(ctx context.Context, revision, want string, manifests []byte) (digest string, found bool, err error) {
	have, err := d.resolve(ctx, revision)
	switch {
	case err == nil && have == want:
		return want, true, nil
	case err == nil:
		byDigest := strings.TrimPrefix(d.settings.Repository, oci.OCIRepositoryPrefix) + "@" + have
		same, err := d.holdsManifests(ctx, byDigest, manifests)
		if err != nil {
			return "", false, fmt.Errorf("revision %s: the tag %s of %s holds %s, not the planned %s, and it could not be read to compare: %w",
				revision, revision, d.settings.Repository, have, want, err)
		}
		if !same {
			return "", false, fmt.Errorf("%w: the tag %s of %s holds %s, not the planned artifact %s: its content is not the planned revision's "+
				"(someone published other content under the revision's tag). Nothing was pinned to it; delete the tag (the next apply "+
				"publishes the planned artifact) or find out who pushed it", ErrTagHoldsOther, revision, d.settings.Repository, have, want)
		}
		return have, true, nil
	case ctx.Err() != nil:
		return "", false, fmt.Errorf("publish revision %s to %s: %w", revision, d.settings.Repository, context.Cause(ctx))
	}
	return "", false, nil
}

// Digest is the digest Publish pins for revision's artifact holding manifests: the one
// published (or found) by this Delivery, else ArtifactDigest of the content. It asks no registry.
func (d *Delivery) Digest(revision string, manifests []byte) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dg, ok := d.digests[revision]; ok {
		return dg, nil
	}
	return ArtifactDigest(revision, manifests)
}

func (d *Delivery) resolve(ctx context.Context, revision string) (string, error) {
	return crane.Digest(d.artifactRef(revision), append(d.oci.GetOptions(), crane.WithContext(ctx))...)
}

// ArtifactRef is the reference of revision's artifact in settings' repository, as the plan shows
// it ("oci://host/path:revision").
func ArtifactRef(settings Settings, revision string) string {
	return settings.Repository + ":" + revision
}

// ObjectName names the OCIRepository and Kustomization of key on cluster: readable, unique by a
// hash of both, and short enough to be a label value (Flux labels what it applies with it).
func ObjectName(key records.Key, cluster string) string {
	sum := sha256.Sum256([]byte(key.String() + "\x00" + cluster))
	return "gradual-" + readable(key.Name, 18) + "-" + readable(cluster, 18) + "-" + hex.EncodeToString(sum[:])[:12]
}

func readable(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > n {
		out = out[:n]
	}
	if out = strings.Trim(out, "-"); out == "" {
		out = "x"
	}
	return out
}

// SourceName names the OCIRepository of key's artifact digest in a namespace: one per artifact
// (a revision, or one cluster's rendering of it with values), shared by the Kustomizations of
// every cluster there that runs it, so that source-controller pulls each artifact once per
// namespace rather than once per cluster.
func SourceName(key records.Key, digest string) string {
	sum := sha256.Sum256([]byte(key.String() + "\x00" + digest))
	return "gradual-" + readable(key.Name, 30) + "-" + hex.EncodeToString(sum[:])[:12]
}

// source is the OCIRepository of key's artifact digest in namespace (SourceName). It names no
// cluster: it serves them all.
func (d *Delivery) source(namespace, digest string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(OCIRepositoryKind)
	u.SetNamespace(namespace)
	u.SetName(SourceName(d.key, digest))
	u.SetLabels(map[string]string{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: d.key.Hash()})
	u.SetAnnotations(map[string]string{records.AnnotationRolloutKey: d.key.String()})
	return u
}

func (d *Delivery) object(gvk schema.GroupVersionKind, namespace, cluster string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(ObjectName(d.key, cluster))
	u.SetLabels(map[string]string{
		records.LabelManagedBy: records.ManagedBy, records.LabelRollout: d.key.Hash(), LabelCluster: readable(cluster, 63),
	})
	u.SetAnnotations(map[string]string{records.AnnotationRolloutKey: d.key.String(), annotationClusterName: cluster})
	return u
}

// Pinning is what Pin writes for one cluster.
type Pinning struct {
	// Digest is the artifact's ("sha256:…").
	Digest string
	// Timeout is the Kustomization's wait timeout: KustomizationTimeout of verify.timeout.
	Timeout time.Duration
	// Substitute are the cluster's variables, when the artifact is a template (values): the
	// Kustomization's spec.postBuild.substitute, so that kustomize-controller renders it for the
	// cluster the way the provider renders it for the plan (the same rules, the same library),
	// and one artifact serves every cluster. nil: the artifact is applied as it is.
	Substitute map[string]string
}

// Pin makes Flux apply the artifact p.Digest to cluster (a Cluster in namespace): the
// OCIRepository pinned to it (SourceName: shared by every cluster of the namespace on that
// artifact) and the cluster's Kustomization that applies it through the Cluster's kubeconfig
// Secret, both created or updated by server-side apply. It returns the Kustomization's
// generation once written: a status about an older one says nothing of this pin, even when the
// digest is the same (only the cluster's variables changed).
func (d *Delivery) Pin(ctx context.Context, namespace, cluster string, p Pinning) (generation int64, err error) {
	digest := p.Digest
	src := d.source(namespace, digest)
	// A sweep (Sweep) of this process waits until the Kustomization names the source.
	unlock := pinning(namespace)
	defer unlock()
	spec := map[string]any{
		"url":      d.settings.Repository,
		"ref":      map[string]any{"digest": digest},
		"insecure": d.settings.Insecure,
		// The digest never changes under a pin: the interval only re-checks the registry.
		"interval": "10m",
	}
	if d.settings.SecretRef != "" {
		spec["secretRef"] = map[string]any{"name": d.settings.SecretRef}
	}
	if d.settings.CertSecretRef != "" {
		spec["certSecretRef"] = map[string]any{"name": d.settings.CertSecretRef}
	}
	src.Object["spec"] = spec
	ks := d.object(KustomizationKind, namespace, cluster)
	labels := ks.GetLabels()
	labels[LabelSource] = src.GetName() // at most 51 characters: a label value
	ks.SetLabels(labels)
	ks.Object["spec"] = map[string]any{
		"sourceRef":     map[string]any{"kind": OCIRepositoryKind.Kind, "name": src.GetName()},
		"path":          "./",
		"interval":      "10m",
		"retryInterval": "5s",
		"timeout":       KustomizationTimeout(p.Timeout).String(),
		"prune":         true,
		"wait":          true,
		// CAPI writes the admin kubeconfig of <cluster> to <cluster>-kubeconfig, key "value";
		// kustomize-controller reads it, this process never does.
		"kubeConfig": map[string]any{"secretRef": map[string]any{"name": cluster + "-kubeconfig", "key": "value"}},
	}
	if spec, ok := ks.Object["spec"].(map[string]any); ok {
		if dec := d.settings.Decryption; dec != nil {
			spec["decryption"] = map[string]any{"provider": "sops", "secretRef": map[string]any{"name": dec.SecretName}}
		}
		if len(p.Substitute) > 0 {
			substitute := make(map[string]any, len(p.Substitute))
			for k, v := range p.Substitute {
				substitute[k] = v
			}
			spec["postBuild"] = map[string]any{"substitute": substitute}
		}
		d.shapeKustomization(spec, cluster) // dependsOn, ApplyOnce, healthCheckExprs (kustomize.go)
	}
	if err := d.writeSource(ctx, src); err != nil {
		return 0, err
	}
	if err := d.mgmt.Apply(ctx, client.ApplyConfigurationFromUnstructured(ks), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return 0, fmt.Errorf("write Kustomization %s/%s: %w", namespace, ks.GetName(), err)
	}
	// The apply's answer is the object as written (controller-runtime decodes it into ks).
	return ks.GetGeneration(), nil
}

// Status is what a cluster's Kustomization says.
type Status struct {
	Exists bool
	// Ready is the Ready condition at the Kustomization's current generation: "True", "False"
	// or "Unknown" (also when not yet observed at this generation).
	Ready, Reason, Message string
	// Applied and Attempted are lastAppliedRevision and lastAttemptedRevision.
	Applied, Attempted string
	// Handled is status.lastHandledReconcileAt: the last reconcile request's token the controller
	// handled (RequestReconcile).
	Handled   string
	Suspended bool
	// Source is the name of the OCIRepository the Kustomization applies (spec.sourceRef.name).
	Source string
	// Generation is the Kustomization's metadata.generation: Ready is about it (or Unknown).
	Generation int64
}

// On reports whether the status shows digest applied and ready.
func (s Status) On(digest string) bool {
	return s.Ready == "True" && revisionIs(s.Applied, digest)
}

// AsOf is s as of the Kustomization's generation: a status about an older spec (a watch event
// from before a pin) says nothing of what was pinned since, even on the same digest (only the
// cluster's variables changed), so its Ready reads Unknown.
func (s Status) AsOf(generation int64) Status {
	if s.Exists && s.Generation < generation {
		s.Ready, s.Reason, s.Message = "Unknown", "", ""
	}
	return s
}

// revisionIs reports whether a Flux revision ("tag@sha256:…" or "sha256:…") names digest.
func revisionIs(rev, digest string) bool {
	return digest != "" && (rev == digest || strings.HasSuffix(rev, "@"+digest))
}

// KustomizationTimeout is the spec.timeout of a Kustomization the provider verifies within
// verify: shorter by a margin (a tenth, from 2 s to 30 s), so that a kustomize-controller at
// work gives its own verdict (HealthCheckFailed) before the provider stops waiting, and a
// revision it started on without a verdict at the end means the controller stopped.
func KustomizationTimeout(verify time.Duration) time.Duration {
	margin := min(max(verify/10, 2*time.Second), 30*time.Second)
	if verify-margin < time.Second {
		return verify
	}
	return verify - margin
}

// Read returns the Kustomization's status on cluster.
func (d *Delivery) Read(ctx context.Context, namespace, cluster string) (Status, error) {
	ks := d.object(KustomizationKind, namespace, cluster)
	if err := d.mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		if apierrors.IsNotFound(err) {
			return Status{}, nil
		}
		return Status{}, err
	}
	return statusOf(ks), nil
}

// statusOf is what the Kustomization ks says (kustomizationView.status). A Kustomization whose
// fields do not have their types (the CRD's schema makes that unlikely) is not ready, saying why.
func statusOf(ks *unstructured.Unstructured) Status {
	var view kustomizationView
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ks.Object, &view); err != nil {
		return Status{Exists: true, Ready: "Unknown", Reason: "Unreadable", Message: "the Kustomization cannot be read: " + err.Error()}
	}
	return view.status()
}

// Objects are the Flux objects of a rollout in one namespace, by cluster: what a plan reads of
// every cluster in Flux mode, read with two lists (the rollout's Kustomizations and its
// OCIRepositories, by its label) so that the requests a plan makes do not grow with the fleet
// (a GET of each per cluster took a no-change plan of 256 Clusters to 37 s under the client's
// rate limit).
type Objects struct {
	status map[string]Status // by cluster; absent: no Kustomization
	pinned map[string]string // by cluster, the digest its Kustomization's OCIRepository is pinned to; absent: none
}

// Status is cluster's Kustomization's status (Exists false when it has none), as Read says.
func (o *Objects) Status(cluster string) Status { return o.status[cluster] }

// Pinned is the digest cluster's Kustomization's OCIRepository is pinned to, as Pinned says.
func (o *Objects) Pinned(cluster string) (string, bool) {
	digest, ok := o.pinned[cluster]
	return digest, ok
}

// listPage is how many objects a page of ReadAll's lists holds: bounded, so that a fleet of
// thousands is read in pages rather than one response the API server must build whole.
const listPage = 500

// ReadAll reads the rollout's Kustomizations and OCIRepositories in namespace. Kustomizations
// that carry the rollout's label but are not its objects for the cluster they name (their name
// is not ObjectName of the rollout and that cluster: a copy, or someone else's) are left out, as
// Read, which reads by name, would never see them.
func (d *Delivery) ReadAll(ctx context.Context, namespace string) (*Objects, error) {
	objs := &Objects{status: map[string]Status{}, pinned: map[string]string{}}
	sources := map[string]string{} // the OCIRepositories by name: their digest
	// The two lists go out together: a no-change plan of a large fleet waits on the management
	// API server, not on the provider's CPU, and each list is its own pages in sequence.
	var g errgroup.Group
	for _, gvk := range []schema.GroupVersionKind{KustomizationKind, OCIRepositoryKind} {
		g.Go(func() error {
			err := d.list(ctx, gvk, namespace, func(u *unstructured.Unstructured) {
				if gvk == OCIRepositoryKind {
					sources[u.GetName()], _, _ = unstructured.NestedString(u.Object, "spec", "ref", "digest")
					return
				}
				if cluster := u.GetAnnotations()[annotationClusterName]; cluster != "" && u.GetName() == ObjectName(d.key, cluster) {
					objs.status[cluster] = statusOf(u)
				}
			})
			if err != nil {
				return fmt.Errorf("list the %ss of %s in namespace %s: %w", gvk.Kind, d.key.Describe(), namespace, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for cluster, st := range objs.status {
		if digest, ok := sources[st.Source]; ok {
			objs.pinned[cluster] = digest
		}
	}
	return objs, nil
}

// list calls each with every object of kind gvk in namespace labelled with the rollout, page by
// page.
func (d *Delivery) list(ctx context.Context, gvk schema.GroupVersionKind, namespace string, each func(*unstructured.Unstructured)) error {
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(namespace), client.Limit(listPage),
			client.MatchingLabels{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: d.key.Hash()}}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := d.mgmt.List(ctx, list, opts...); err != nil {
			return err
		}
		for i := range list.Items {
			each(&list.Items[i])
		}
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// Pinned reads the digest cluster's Kustomization's OCIRepository is pinned to; "" and false
// when either does not exist.
func (d *Delivery) Pinned(ctx context.Context, namespace, cluster string) (string, bool, error) {
	src, err := d.Source(ctx, namespace, cluster)
	if err != nil || src == nil {
		return "", false, err
	}
	digest, _, _ := unstructured.NestedString(src.Object, "spec", "ref", "digest")
	return digest, true, nil
}

// Source reads the OCIRepository cluster's Kustomization applies; nil when either does not exist.
func (d *Delivery) Source(ctx context.Context, namespace, cluster string) (*unstructured.Unstructured, error) {
	ks := d.object(KustomizationKind, namespace, cluster)
	if err := d.mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	if name == "" {
		return nil, nil
	}
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(OCIRepositoryKind)
	if err := d.mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, src); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return src, nil
}

// Drift is Flux's view of a cluster the records say runs a revision, when it disagrees: its
// Kustomization or OCIRepository gone (deleted by hand), its Kustomization not ready by Flux's own
// verdict (Ready False, with Flux's reason), or ready on something other than the pinned digest
// (its spec edited by hand). "" when Flux keeps the cluster on the pin, or is still working on it
// (Ready Unknown): a reconcile in progress is not drift. The next apply pins the cluster again
// and verifies it, as direct delivery repairs drifted objects.
func Drift(st Status, pinned string, sourceExists bool) string {
	switch {
	case !st.Exists:
		return "Flux: its Kustomization is gone"
	case !sourceExists:
		return "Flux: its OCIRepository is gone"
	case st.Ready == "False":
		return fmt.Sprintf("Flux: Kustomization not ready (%s): %s", st.Reason, firstLine(st.Message))
	case st.Ready == "True" && pinned != "" && !revisionIs(st.Applied, pinned):
		return fmt.Sprintf("Flux: Kustomization applied %s, not the pinned %s", st.Applied, pinned)
	}
	return ""
}

// firstLine is s up to its first newline: Flux's messages can run to a log's length.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	return line
}

// Failure classes of a Kustomization that did not get a revision ready.
var (
	// ErrRevisionFailed: Flux applied, or tried to apply, the revision and it failed on its own
	// account (refused by the workload API server, not built, not ready in time).
	ErrRevisionFailed = errors.New("the revision failed in Flux")
	// ErrInfrastructure: Flux could not get to the revision (source not fetched, kubeconfig
	// Secret missing, workload unreachable, controller not running).
	ErrInfrastructure = errors.New("flux could not deliver the revision")
)

// Classify says why st is not digest applied and ready: nil while Flux is still working on it
// (Ready Unknown, a failure that Flux retries and may get past, or a failure of an earlier
// revision), otherwise a *blame.FluxError that wraps ErrRevisionFailed or ErrInfrastructure.
// final says the wait is over. The verdict is blame.FluxConditionVerdict's, from
// kustomize-controller's reasons and the API server's status reason it quotes, never from the
// wording of a message.
func Classify(st Status, digest string, final bool) error {
	if st.On(digest) {
		return nil
	}
	msg := st.Message
	if msg == "" {
		msg = "no word from kustomize-controller"
	}
	switch {
	case !st.Exists:
		return fluxError(blame.Verdict{Class: blame.Infrastructure, Rule: "Kustomization gone"}, "the Kustomization is gone")
	case st.Suspended:
		return fluxError(blame.Verdict{Class: blame.Infrastructure, Rule: "Kustomization suspended"}, "the Kustomization is suspended")
	}
	attempted := revisionIs(st.Attempted, digest)
	v := blame.FluxConditionVerdict(blame.FluxCondition{Attempted: attempted, Ready: st.Ready, Reason: st.Reason, Message: msg}, final)
	switch v.Rule {
	case "still at work":
		return nil
	case "not ready in time":
		return fluxError(v, fmt.Sprintf("not ready within the verify timeout: %s: %s", st.Reason, msg))
	case "controller gave no verdict":
		return fluxError(v, fmt.Sprintf("kustomize-controller started on %s but gave no verdict within the verify timeout: %s: %s",
			digest, st.Reason, msg))
	case "revision never attempted":
		return fluxError(v, fmt.Sprintf("Flux did not attempt %s within the verify timeout (last attempted %q): %s: %s",
			digest, st.Attempted, st.Reason, msg))
	}
	return fluxError(v, fmt.Sprintf("%s: %s", st.Reason, msg))
}

// fluxError wraps what kustomize-controller said with its verdict and the matching sentinel.
func fluxError(v blame.Verdict, what string) error {
	sentinel := ErrInfrastructure
	if v.Class == blame.Revision {
		sentinel = ErrRevisionFailed
	}
	return &blame.FluxError{Verdict: v, Err: fmt.Errorf("%w: %s", sentinel, what)}
}

// Remove deletes cluster's Kustomization (Flux prunes what it applied there, but what keptByFlux
// marks; with orphan nothing: its spec.prune is turned off first, which kustomize-controller reads
// as it finalizes the deletion), and then the OCIRepository it named once no other Kustomization
// names it, and returns once they are gone or ctx ends. It asks about that one source only (a
// list by LabelSource that returns at most one object): a destroy of a thousand clusters must
// not list the rollout's every object once per cluster. What else is left unnamed, the end of a
// run sweeps (Sweep).
func (d *Delivery) Remove(ctx context.Context, namespace, cluster string, poll time.Duration, orphan bool) error {
	if orphan {
		if err := d.stopPruning(ctx, namespace, cluster); err != nil {
			return err
		}
	}
	ks := d.object(KustomizationKind, namespace, cluster)
	source := ""
	if err := d.mgmt.Get(ctx, client.ObjectKeyFromObject(ks), ks); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("read Kustomization %s/%s: %w", namespace, ks.GetName(), err)
	} else if err == nil {
		source, _, _ = unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	}
	if err := d.deleteAndWait(ctx, ks, "Flux prunes before it goes", poll); err != nil {
		return err
	}
	if source == "" {
		return nil
	}
	src, err := d.releaseSource(ctx, namespace, source)
	if err != nil || src == nil {
		return err
	}
	return d.waitGone(ctx, src, "source-controller drops the artifact before it goes", poll)
}

// releaseSource deletes the OCIRepository name in namespace unless a Kustomization still names
// it, with this process's Pins in the namespace held off meanwhile (as sweep); it returns the
// source it deleted, nil for none.
func (d *Delivery) releaseSource(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	lock := namespaceLock(namespace)
	lock.Lock()
	defer lock.Unlock()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(KustomizationKind.GroupVersion().WithKind(KustomizationKind.Kind + "List"))
	if err := d.mgmt.List(ctx, list, client.InNamespace(namespace), client.Limit(1),
		client.MatchingLabels{records.LabelRollout: d.key.Hash(), LabelSource: name}); err != nil {
		return nil, fmt.Errorf("list the Kustomizations naming OCIRepository %s/%s: %w", namespace, name, err)
	}
	if len(list.Items) > 0 {
		return nil, nil
	}
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(OCIRepositoryKind)
	src.SetNamespace(namespace)
	src.SetName(name)
	if err := d.mgmt.Delete(ctx, src); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("delete OCIRepository %s/%s: %w", namespace, name, err)
	}
	return src, nil
}

// writeSource creates or updates the OCIRepository src. One being deleted (a sweep let it go,
// source-controller still holds it) would take the update and then be gone: its deletion is
// waited out (within ctx) and it is created again.
func (d *Delivery) writeSource(ctx context.Context, src *unstructured.Unstructured) error {
	for {
		want := src.DeepCopy()
		if err := d.mgmt.Apply(ctx, client.ApplyConfigurationFromUnstructured(want), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("write OCIRepository %s/%s: %w", src.GetNamespace(), src.GetName(), err)
		}
		if want.GetDeletionTimestamp() == nil {
			return nil
		}
		if err := d.waitGone(ctx, want, "source-controller drops the artifact before it goes", sourceGonePoll); err != nil {
			return err
		}
	}
}

// sourceGonePoll is how often writeSource reads an OCIRepository being deleted.
const sourceGonePoll = 500 * time.Millisecond

// Sweep deletes the rollout's OCIRepositories in namespace that none of its Kustomizations
// names (the artifacts no cluster runs any more, once every cluster moved on or left), and
// returns once they are gone or ctx ends. It waits for them: source-controller holds each with
// a finalizer until it has dropped the artifact, and a destroy that returned before then would
// leave an object behind that it reported removed. With poll 0 it deletes without waiting: the
// end of a run, where nothing was reported removed. Removals that run side by side each sweep;
// the last one to see its Kustomization gone sees every other one gone too.
func (d *Delivery) Sweep(ctx context.Context, namespace string, poll time.Duration) error {
	deleted, err := d.sweep(ctx, namespace)
	if err != nil || poll == 0 {
		return err
	}
	for _, src := range deleted {
		if err := d.waitGone(ctx, src, "source-controller drops the artifact before it goes", poll); err != nil {
			return err
		}
	}
	return nil
}

// sweep deletes what Sweep deletes and returns it, with the Pins of this process in namespace
// held off meanwhile: between its two lists, a Pin could write a source and the Kustomization
// naming it, and the sweep would find the source and not the name.
func (d *Delivery) sweep(ctx context.Context, namespace string) ([]*unstructured.Unstructured, error) {
	lock := namespaceLock(namespace)
	lock.Lock()
	defer lock.Unlock()
	named := map[string]bool{}
	if err := d.list(ctx, KustomizationKind, namespace, func(u *unstructured.Unstructured) {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "sourceRef", "name")
		named[name] = true
	}); err != nil {
		return nil, fmt.Errorf("list the Kustomizations of %s in namespace %s: %w", d.key.Describe(), namespace, err)
	}
	var unused []*unstructured.Unstructured
	if err := d.list(ctx, OCIRepositoryKind, namespace, func(u *unstructured.Unstructured) {
		if !named[u.GetName()] {
			unused = append(unused, u.DeepCopy())
		}
	}); err != nil {
		return nil, fmt.Errorf("list the OCIRepositories of %s in namespace %s: %w", d.key.Describe(), namespace, err)
	}
	for _, src := range unused {
		if err := d.mgmt.Delete(ctx, src); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete OCIRepository %s/%s: %w", namespace, src.GetName(), err)
		}
	}
	return unused, nil
}

// namespaceLocks hold off, per namespace, the Pins of this process while a sweep lists and
// deletes (Pins share it, a sweep takes it alone). Only this process pins the rollout: the Lease
// keeps every other out.
var namespaceLocks sync.Map // namespace → *sync.RWMutex

func namespaceLock(namespace string) *sync.RWMutex {
	l, _ := namespaceLocks.LoadOrStore(namespace, &sync.RWMutex{})
	return l.(*sync.RWMutex) //nolint:forcetypeassert // only *sync.RWMutex is stored
}

// pinning holds off a sweep of namespace until the returned func is called.
func pinning(namespace string) (unlock func()) {
	l := namespaceLock(namespace)
	l.RLock()
	return l.RUnlock
}

// deleteAndWait deletes obj and waits until it is gone (waitGone).
func (d *Delivery) deleteAndWait(ctx context.Context, obj *unstructured.Unstructured, why string, poll time.Duration) error {
	if err := d.mgmt.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return d.waitGone(ctx, obj, why, poll)
}

// waitGone polls until the API server no longer has obj (its controller's finalizer removed) or
// ctx ends; why names what holds it meanwhile, for the error.
func (d *Delivery) waitGone(ctx context.Context, obj *unstructured.Unstructured, why string, poll time.Duration) error {
	kind, namespace, name := obj.GetKind(), obj.GetNamespace(), obj.GetName()
	live := obj.DeepCopy()
	for {
		err := d.mgmt.Get(ctx, client.ObjectKeyFromObject(obj), live)
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s/%s not gone (%s): %w", kind, namespace, name, why, context.Cause(ctx))
		case <-time.After(poll):
		}
	}
}

// stopPruning turns off spec.prune on cluster's Kustomization (a merge patch: nothing else
// changes); one that is gone already has nothing left to prune.
func (d *Delivery) stopPruning(ctx context.Context, namespace, cluster string) error {
	ks := d.object(KustomizationKind, namespace, cluster)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"prune":false}}`))
	if err := d.mgmt.Patch(ctx, ks, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("turn off pruning on Kustomization %s/%s: %w", namespace, ks.GetName(), err)
	}
	return nil
}

// PruneDisabled is Flux's per-object opt-out of pruning: kustomize-controller never deletes an
// object that carries it, neither when a revision drops it nor when its Kustomization is deleted.
const PruneDisabled = "kustomize.toolkit.fluxcd.io/prune"

// keptByFlux says whether Flux must never prune o, as direct delivery never deletes it
// (internal/apply's Delete): a Namespace or a CustomResourceDefinition (deleting either deletes
// whatever it holds, and through Flux the runner cannot read a workload cluster to tell whether
// it holds objects of others, or existed before the rollout), and an object marked
// gradual.dev/prune: disabled by its author.
func keptByFlux(o *unstructured.Unstructured) bool {
	gk := o.GroupVersionKind().GroupKind()
	if gk == (schema.GroupKind{Kind: "Namespace"}) || gk == (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
		return true
	}
	return o.GetAnnotations()[apply.PruneAnnotation] == "disabled" || o.GetLabels()[apply.PruneAnnotation] == "disabled"
}

// Kept names the objects of objs that Flux never prunes (keptByFlux), "Kind namespace/name".
func Kept(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if keptByFlux(o) {
			out = append(out, manifest.RefOf(o).String())
		}
	}
	return out
}

// Manifests renders objects as the multi-document YAML an artifact holds; what Flux must never
// prune carries Flux's opt-out (keptByFlux), the objects themselves are not changed.
func Manifests(objs []*unstructured.Unstructured) ([]byte, error) {
	var b strings.Builder
	for _, o := range objs {
		if keptByFlux(o) && o.GetAnnotations()[PruneDisabled] != "disabled" {
			o = o.DeepCopy()
			annotations := o.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[PruneDisabled] = "disabled"
			o.SetAnnotations(annotations)
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return []byte(b.String()), nil
}
