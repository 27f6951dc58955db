package manifest

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// clusterScoped are the built-in Kubernetes kinds that live outside namespaces (as
// `kubectl api-resources --namespaced=false` lists them on v1.36), by group and kind.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true, {Kind: "ComponentStatus"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
}

// IsClusterScoped reports whether objects of gk live outside namespaces: a built-in
// cluster-scoped kind, or a kind that a CustomResourceDefinition of s defines with scope Cluster.
// Other kinds, custom ones whose CRD is not in s included, are taken as namespaced, as most
// are; the apply's check against each cluster's API discovery has the last word.
func (s *Set) IsClusterScoped(gk schema.GroupKind) bool {
	if clusterScoped[gk] {
		return true
	}
	for _, obj := range s.Objects {
		if obj.GetAPIVersion() != "apiextensions.k8s.io/v1" || obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope")
		if group == gk.Group && kind == gk.Kind {
			return scope == "Cluster"
		}
	}
	return false
}

// DefaultNamespace puts the objects of s that have no metadata.namespace, and are not of a
// cluster-scoped kind (see IsClusterScoped), in namespace ns, as `helm template` output and
// `kubectl apply -n` expect. It fails when that makes two objects the same.
func (s *Set) DefaultNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	seen := map[string]bool{}
	for _, obj := range s.Objects {
		if obj.GetNamespace() == "" && !s.IsClusterScoped(obj.GroupVersionKind().GroupKind()) {
			obj.SetNamespace(ns)
		}
		key := Key(obj)
		if seen[key] {
			return fmt.Errorf("%s is defined twice once default namespace %q is set on the objects without one", key, ns)
		}
		seen[key] = true
	}
	sort.SliceStable(s.Objects, func(i, j int) bool { return Key(s.Objects[i]) < Key(s.Objects[j]) })
	return nil
}

// Halves parts s — both halves of a Bundle, default namespace applied — into the objects of
// public (the half Terraform shows) and the others (the sensitive half). Bundle refuses an object
// in both halves, so identities tell them apart; they are compared as written (before the default
// namespace), and an object that could be either counts as public, so that checks meant for the
// shown half see it.
func (s *Set) Halves(public string) (shown, hidden []*unstructured.Unstructured) {
	id := func(obj *unstructured.Unstructured, ns string) string {
		return obj.GetAPIVersion() + "/" + obj.GetKind() + "/" + ns + "/" + obj.GetName()
	}
	inPublic := map[string]bool{}
	if p, err := Parse(public); err == nil {
		for _, obj := range p.Objects {
			inPublic[id(obj, obj.GetNamespace())] = true
		}
	}
	for _, obj := range s.Objects {
		if inPublic[id(obj, obj.GetNamespace())] || inPublic[id(obj, "")] {
			shown = append(shown, obj)
		} else {
			hidden = append(hidden, obj)
		}
	}
	return shown, hidden
}
