package fluxdelivery

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// sealSet is a public ConfigMap and a sensitive Secret, the Secret second (Bundle sorts by key).
func sealSet(t *testing.T) *manifest.Set {
	t.Helper()
	set, err := manifest.Bundle("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pub, namespace: app}\ndata: {k: public-value}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: app}\nstringData: {password: s3cr3t-plaintext}\n")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestSealEncryptsOnlySensitive: the sensitive Secret goes into the artifact encrypted (its
// identity readable), the public ConfigMap as it is; the same content and recipient give the same
// artifact digest (what the plan shows is what apply pins), another recipient another one.
func TestSealEncryptsOnlySensitive(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	s := Settings{Repository: "oci://r.example/fleet/web", Decryption: &Decryption{AgeRecipient: id.Recipient().String(), SecretName: "sops-age"}}
	set := sealSet(t)
	sensitive := map[string]bool{manifest.Key(set.Objects[1]): true}
	digestOf := func(s Settings) string {
		sealed, err := s.Seal(set.Objects, sensitive)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Manifests(sealed)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(m, []byte("s3cr3t-plaintext")) {
			t.Fatalf("the artifact holds the plaintext:\n%s", m)
		}
		for _, want := range []string{"public-value", "name: db", "ENC[AES256_GCM", "encrypted_regex"} {
			if !bytes.Contains(m, []byte(want)) {
				t.Errorf("the artifact lacks %q:\n%s", want, m)
			}
		}
		d, err := ArtifactDigest("abc", m)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digestOf(s)
	if again := digestOf(s); again != first {
		t.Errorf("the same content sealed twice: digests %s and %s", first, again)
	}
	other, _ := age.GenerateX25519Identity()
	s2 := s
	s2.Decryption = &Decryption{AgeRecipient: other.Recipient().String(), SecretName: "sops-age"}
	if digestOf(s2) == first {
		t.Error("another recipient gave the same artifact")
	}
	if string(s.RevisionSettings()) == string(s2.RevisionSettings()) {
		t.Error("the recipient is not part of the revision")
	}
	if got := set.Objects[1].Object["stringData"].(map[string]any)["password"]; got != "s3cr3t-plaintext" {
		t.Errorf("Seal changed its input: %v", got)
	}
}

func TestSealRefusals(t *testing.T) {
	set := sealSet(t)
	if _, err := (Settings{}).Seal(set.Objects, map[string]bool{manifest.Key(set.Objects[1]): true}); !errors.Is(err, ErrSensitiveWithoutDecryption) {
		t.Errorf("without decryption: %v", err)
	}
	if out, err := (Settings{}).Seal(set.Objects, nil); err != nil || !reflect.DeepEqual(out, set.Objects) {
		t.Errorf("nothing sensitive: %v", err)
	}
	id, _ := age.GenerateX25519Identity()
	s := Settings{Decryption: &Decryption{AgeRecipient: id.Recipient().String(), SecretName: "k"}}
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "namespace": "app"}}}
	_, err := s.Seal([]*unstructured.Unstructured{dep}, map[string]bool{manifest.Key(dep): true})
	if err == nil || !strings.Contains(err.Error(), "only v1 Secrets and ConfigMaps") {
		t.Errorf("a Deployment: %v", err)
	}
	if err := (Settings{Repository: "oci://r.example/x", Decryption: &Decryption{AgeRecipient: "age1bad", SecretName: "k"}}).Validate(); err == nil {
		t.Error("an invalid recipient passed Validate")
	}
}

// TestPinDecrypts: with Decryption each Kustomization decrypts with SOPS and the Secret named.
func TestPinDecrypts(t *testing.T) {
	mgmt := fake.NewClientBuilder().Build()
	key := records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}
	s := Settings{Repository: "oci://r.example/fleet/web", Decryption: &Decryption{AgeRecipient: "age1x", SecretName: "sops-age"}}
	spec := pinned(t, mgmt, New(mgmt, s, key))
	want := map[string]any{"provider": "sops", "secretRef": map[string]any{"name": "sops-age"}}
	if !reflect.DeepEqual(spec["decryption"], want) {
		t.Errorf("decryption = %v, want %v", spec["decryption"], want)
	}
	s.Decryption = nil
	if spec = pinned(t, mgmt, New(mgmt, s, key)); spec["decryption"] != nil {
		t.Errorf("decryption = %v after a pin without it", spec["decryption"])
	}
}
