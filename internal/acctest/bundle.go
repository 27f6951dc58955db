package acctest

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
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
