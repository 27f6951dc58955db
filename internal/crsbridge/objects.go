package crsbridge

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

const (
	// AnnotationBridge is on every object the bridge carries: the field manager of the module
	// whose object it is (records.Key.FieldManager). The module's next apply on the cluster
	// finds its objects under Cluster API's field manager and this annotation: its own, handed
	// out by its bridge, not someone else's to adopt (apply.Existing.Bridge).
	AnnotationBridge = apply.AnnotationBridge
	// LabelBridgeOf is on the ClusterResourceSet and its ConfigMaps: the hash of the
	// assignment's key, which lists them; the key itself is in records.AnnotationRolloutKey.
	LabelBridgeOf = "gradual.dev/bridge-of"
	// AnnotationModule and AnnotationRevision say which module and revision a ConfigMap holds.
	AnnotationModule   = "gradual.dev/module"
	AnnotationRevision = "gradual.dev/revision"
	// dataKey is the one key of a ConfigMap's data; Cluster API applies every key's documents.
	dataKey = "manifests.yaml"
	// MaxConfigMapSize is the API server's limit on one object (etcd's 1.5 MiB request is the
	// hard limit; Kubernetes refuses a ConfigMap whose data exceeds 1 MiB).
	MaxConfigMapSize = 1 << 20
)

// crsGroupVersion is the ClusterResourceSet API of Cluster API v1.11 and later (v1beta2).
const crsGroupVersion = "addons.cluster.x-k8s.io/v1beta2"

// Bridge is one assignment's bridge as it should be in the management cluster.
type Bridge struct {
	// Key is the assignment's key; Namespace is where its Clusters are (the ClusterResourceSet
	// and its ConfigMaps must be beside them).
	Key       records.Key
	Namespace string
	Selector  labels.Selector
	// Labels go on the ClusterResourceSet and its ConfigMaps besides LabelBridgeOf: the
	// cluster.x-k8s.io/watch-filter label when Cluster API's manager runs with --watch-filter.
	Labels map[string]string
	// Modules in depends_on order: the ClusterResourceSet lists their ConfigMaps in this order,
	// and Cluster API applies them in it.
	Modules []Carried
}

// Carried is one module the bridge hands out.
type Carried struct {
	Module, Revision string
	// FieldManager is the module key's (AnnotationBridge).
	FieldManager string
	// Objects are the revision's objects when the bridge moves to it (Choice.Moved); nil keeps
	// the ConfigMap the bridge has.
	Objects []*unstructured.Unstructured
}

// Name is the ClusterResourceSet's name: the assignment's object name (records.Key.ObjectName).
func Name(key records.Key) string { return key.ObjectName() + ".bridge" }

// ConfigMapName is the name of the ConfigMap holding module.
func ConfigMapName(key records.Key, module string) string { return Name(key) + "." + module }

// SelectorFor is the ClusterResourceSet's clusterSelector for the assignment's selector: an
// error for one Cluster API cannot express, or none (a ClusterResourceSet with an empty
// selector matches nothing).
func SelectorFor(sel labels.Selector) (*metav1.LabelSelector, error) {
	if sel == nil || sel.Empty() {
		return nil, fmt.Errorf("follow_joins needs a `selector`: Cluster API's ClusterResourceSet picks Clusters by label, and one with an empty selector picks none")
	}
	ls, err := metav1.ParseToLabelSelector(sel.String())
	if err != nil {
		return nil, fmt.Errorf("the selector %q cannot be a ClusterResourceSet's clusterSelector: %w", sel.String(), err)
	}
	return ls, nil
}

// Payload is the ConfigMap data of one module: its objects as YAML documents, each marked with
// AnnotationBridge. Cluster API sorts the documents of one ConfigMap for creation (Namespaces
// and CRDs first) and creates each that does not exist.
func Payload(fieldManager string, objs []*unstructured.Unstructured) (string, error) {
	var buf bytes.Buffer
	for _, o := range objs {
		c := o.DeepCopy()
		ann := c.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationBridge] = fieldManager
		c.SetAnnotations(ann)
		raw, err := yaml.Marshal(c.Object)
		if err != nil {
			return "", fmt.Errorf("encode %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(raw)
	}
	return buf.String(), nil
}

// CheckSize refuses a module whose bridge ConfigMap would exceed MaxConfigMapSize.
func CheckSize(module string, payload string) error {
	return checkSize(fmt.Sprintf("module %q", module), "the module", payload)
}

func checkSize(what, split string, payload string) error {
	if n := len(payload); n > MaxConfigMapSize {
		return fmt.Errorf("%s: %d bytes as the bridge's ConfigMap, over Kubernetes' limit of %d bytes (1 MiB) on a ConfigMap that ClusterResourceSet reads: split %s, or leave follow_joins off", what, n, MaxConfigMapSize, split)
	}
	return nil
}

// TargetRefusals say why a resource picking clusters by q, with per-cluster values or not,
// cannot be bridged: Cluster API picks Clusters by label, and renders nothing per cluster.
func TargetRefusals(q fleet.Query, values bool) []string {
	var out []string
	if len(q.Names) > 0 {
		out = append(out, "it picks clusters by `names`: Cluster API's ClusterResourceSet picks Clusters by label only; use `selector`")
	} else if _, err := SelectorFor(q.Selector); err != nil {
		out = append(out, err.Error())
	}
	if values {
		out = append(out, "it has per-cluster `values`, which ClusterResourceSet cannot render for a joiner")
	}
	return out
}

// Refusal says why objs (what names them: `module "cni"`, "the manifests"; split, what to
// split) cannot be carried: Secrets or sensitive values, which a bridge ConfigMap would hold in
// the clear, or a payload over MaxConfigMapSize. "" when they can; fieldManager is their
// AnnotationBridge.
func Refusal(what, split, fieldManager string, objs []*unstructured.Unstructured, sensitive bool) string {
	if sensitive || slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetAPIVersion() == "v1" && o.GetKind() == "Secret" }) {
		return what + " holds Secrets or sensitive values, which the bridge would keep in a ConfigMap in the clear"
	}
	payload, err := Payload(fieldManager, objs)
	if err == nil {
		err = checkSize(what, split, payload)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func (b Bridge) labels() map[string]any {
	out := map[string]any{LabelBridgeOf: b.Key.Hash()}
	keys := make([]string, 0, len(b.Labels))
	for k := range b.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out[k] = b.Labels[k]
	}
	return out
}

// ClusterResourceSet is the bridge's ClusterResourceSet: strategy ApplyOnce, so Cluster API
// creates the objects on a cluster once (a joiner) and never writes them again; the next apply
// owns them from then on. Members of the fleet match too: ApplyOnce creates only what is
// missing and never changes an object that exists.
func (b Bridge) ClusterResourceSet() (*unstructured.Unstructured, error) {
	sel, err := SelectorFor(b.Selector)
	if err != nil {
		return nil, err
	}
	selMap, err := toMap(sel)
	if err != nil {
		return nil, err
	}
	resources := make([]any, 0, len(b.Modules))
	for _, m := range b.Modules {
		resources = append(resources, map[string]any{"kind": "ConfigMap", "name": ConfigMapName(b.Key, m.Module)})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crsGroupVersion, "kind": "ClusterResourceSet",
		"metadata": map[string]any{
			"name": Name(b.Key), "namespace": b.Namespace, "labels": b.labels(),
			"annotations": map[string]any{records.AnnotationRolloutKey: b.Key.String()},
		},
		"spec": map[string]any{"strategy": "ApplyOnce", "clusterSelector": selMap, "resources": resources},
	}}, nil
}

// ConfigMap is module m's ConfigMap holding payload.
func (b Bridge) ConfigMap(m Carried, payload string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": ConfigMapName(b.Key, m.Module), "namespace": b.Namespace, "labels": b.labels(),
			"annotations": map[string]any{records.AnnotationRolloutKey: b.Key.String(), AnnotationModule: m.Module, AnnotationRevision: m.Revision},
		},
		"data": map[string]any{dataKey: payload},
	}}
}

func toMap(v any) (map[string]any, error) {
	raw, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, yaml.Unmarshal(raw, &out)
}
