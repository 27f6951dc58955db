package acctest

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// BigBundle is YAML of about size bytes that compresses poorly: a Namespace and ConfigMaps in
// it, each holding up to 768 KiB of base64 of pseudo-random bytes (an object holds 1 MiB at
// most, so a big bundle is many objects). The same arguments give the same bundle.
func BigBundle(namespace string, size int) string {
	const perObject = 768 << 10
	r := rand.New(rand.NewPCG(uint64(size), 42))
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", namespace)
	for i := 0; b.Len() < size; i++ {
		raw := make([]byte, min(perObject, size-b.Len())*3/4+1)
		for j := range raw {
			raw[j] = byte(r.Uint32())
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob-%d\n  namespace: %s\ndata:\n  blob: %s\n",
			i, namespace, base64.StdEncoding.EncodeToString(raw))
	}
	return b.String()
}

// ExpectChunkedRecord checks that the management record of key is compressed and cut into at
// least atLeast chunk Secrets besides its head (in records.DefaultNamespace).
func ExpectChunkedRecord(f *testbed.Fleet, key records.Key, atLeast int) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	// A check function gets no context.
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	head := &corev1.Secret{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: records.DefaultNamespace, Name: key.ObjectName()}, head); err != nil {
		return fmt.Errorf("management record of %s: %w", key.Describe(), err)
	}
	if _, ok := head.Data["record"]; !ok {
		return fmt.Errorf("management record of %s is not compressed: data keys %v", key.Describe(), head.Data)
	}
	list := &corev1.SecretList{}
	if err := mc.List(ctx, list, client.InNamespace(records.DefaultNamespace), client.MatchingLabels{records.LabelRollout: key.Hash()}, client.HasLabels{records.LabelChunk}); err != nil {
		return err
	}
	if len(list.Items) < atLeast {
		return fmt.Errorf("management record of %s: %d chunk Secrets, want at least %d", key.Describe(), len(list.Items), atLeast)
	}
	return nil
}
