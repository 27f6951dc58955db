package fluxdelivery

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/sopsenc"
)

// ErrSensitiveWithoutDecryption is Seal's error for sensitive objects without Settings.Decryption.
var ErrSensitiveWithoutDecryption = errors.New("sensitive objects through Flux need delivery.flux.decryption")

// Seal returns objs with those named in sensitive (manifest.Key) encrypted for
// s.Decryption's recipient (sopsenc): what the artifact and the management cluster's records
// hold of them, never their plaintext. The others are returned as they are; objs is not changed.
// The result is a function of the objects and the recipient, so that the artifact's digest is
// known at plan (sopsenc's package doc says why that costs nothing the revision does not).
func (s Settings) Seal(objs []*unstructured.Unstructured, sensitive map[string]bool) ([]*unstructured.Unstructured, error) {
	var idx []int
	var plain []map[string]any
	for i, o := range objs {
		if sensitive[manifest.Key(o)] {
			idx = append(idx, i)
			plain = append(plain, o.Object)
		}
	}
	if len(idx) == 0 {
		return objs, nil
	}
	if s.Decryption == nil {
		return nil, ErrSensitiveWithoutDecryption
	}
	for _, i := range idx {
		if !sopsenc.Encryptable(objs[i].Object) {
			return nil, fmt.Errorf("%s in sensitive_manifests: through Flux only v1 Secrets and ConfigMaps can be delivered "+
				"encrypted (their data, stringData and binaryData are; any other kind would be published readable)", manifest.Key(objs[i]))
		}
	}
	sealed, err := sopsenc.Objects(plain, s.Decryption.AgeRecipient)
	if err != nil {
		return nil, fmt.Errorf("encrypt sensitive_manifests: %w", err)
	}
	out := slices.Clone(objs)
	for n, i := range idx {
		out[i] = &unstructured.Unstructured{Object: sealed[n]}
	}
	return out, nil
}
