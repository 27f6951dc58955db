package owners

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/extension"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// extensionConfigVersions are tried in order: v1beta2 (CAPI v1.11+), then v1alpha1. A v1beta2
// ExtensionConfig decodes into the v1alpha1 type (the fields read here have one JSON shape), and
// listing an older version of a CRD served without a conversion webhook would fail.
var extensionConfigVersions = []string{"v1beta2", "v1alpha1"}

// Extension is an update extension ready to call: its client and the handlers its Discovery
// answer lists for the two hooks.
type Extension struct {
	Name         string
	Client       *extension.Client
	CanUpdate    []extension.Handler
	CanUpdateSet []extension.Handler
	Update       []extension.Handler
}

// connect builds a client for each endpoint and asks its Discovery hook what it serves. Any
// failure is an error: an extension the user names (or registers) that cannot be reached
// would silently change the plan.
func connect(ctx context.Context, endpoints []extension.Endpoint, opts extension.Options) ([]*Extension, error) {
	var out []*Extension
	for _, ep := range endpoints {
		c, err := extension.New(ep, opts)
		if err != nil {
			return nil, extensionError(err)
		}
		resp, err := c.Discover(ctx)
		if err != nil {
			return nil, extensionError(err)
		}
		out = append(out, &Extension{
			Name: ep.Name, Client: c,
			CanUpdate:    extension.HandlersFor(resp, extension.HookCanUpdateMachine),
			CanUpdateSet: extension.HandlersFor(resp, extension.HookCanUpdateMachineSet),
			Update:       extension.HandlersFor(resp, extension.HookUpdateMachine),
		})
	}
	return out, nil
}

// fromExtensionConfigs are the endpoints of the management cluster's ExtensionConfig objects,
// sorted by name. Those reachable only through a Service are left out, with a note: they serve
// the CAPI controllers, not the machine running Terraform.
func fromExtensionConfigs(ctx context.Context, c client.Client, namespace string) ([]extension.Endpoint, []string, error) {
	list := &unstructured.UnstructuredList{}
	served := false
	for _, v := range extensionConfigVersions {
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "runtime.cluster.x-k8s.io", Version: v, Kind: "ExtensionConfigList"})
		err := c.List(ctx, list)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, nil, usererr.Wrap(err, "Cannot List ExtensionConfigs", "Listing the management cluster's ExtensionConfig objects (to find update extensions) failed.")
		}
		served = true
		break
	}
	if !served {
		return nil, nil, nil
	}
	items := list.Items
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	var eps []extension.Endpoint
	var notes []string
	for i := range items {
		var ec runtimev1.ExtensionConfig
		// Only the spec is read, and v1beta2's status differs from v1alpha1's.
		delete(items[i].Object, "status")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, &ec); err != nil {
			notes = append(notes, fmt.Sprintf("ExtensionConfig %s does not decode, ignored: %v", items[i].GetName(), err))
			continue
		}
		if ok, err := servesNamespace(ctx, c, &ec, namespace); err != nil {
			return nil, nil, err
		} else if !ok {
			continue
		}
		ep, err := extension.FromExtensionConfig(&ec)
		if err != nil {
			notes = append(notes, fmt.Sprintf("ExtensionConfig %s ignored: %v", ec.Name, err))
			continue
		}
		eps = append(eps, ep)
	}
	return eps, notes, nil
}

// extensionError turns an extension failure into what the user reads.
func extensionError(err error) error {
	kind := extension.KindOf(err)
	var hint string
	switch kind {
	case extension.KindInsecureURL:
		hint = "Give the extension an https:// URL and its ca_bundle."
	case extension.KindConfig:
		hint = "Check the extension's url, ca_bundle and timeout."
	case extension.KindTimeout:
		hint = "The extension did not answer in time; check that it is running, or raise its timeout (at most 30s)."
	case extension.KindRedirect:
		hint = "Redirects are never followed; configure the URL the extension really serves."
	case extension.KindConnection:
		hint = "Check that the extension is reachable from where Terraform runs and that ca_bundle signs its certificate."
	default:
		hint = "Check the extension's logs; nothing was changed."
	}
	return usererr.Wrap(err, "Update Extension Failed", hint)
}

// servesNamespace applies an ExtensionConfig's namespaceSelector, as CAPI does: its handlers
// are called only for clusters in namespaces the selector matches (all, when unset).
func servesNamespace(ctx context.Context, c client.Client, ec *runtimev1.ExtensionConfig, namespace string) (bool, error) {
	if ec.Spec.NamespaceSelector == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ec.Spec.NamespaceSelector)
	if err != nil {
		return false, usererr.Wrap(err, "Invalid ExtensionConfig", fmt.Sprintf("ExtensionConfig %s has a namespaceSelector that does not parse.", ec.Name))
	}
	if sel.Empty() {
		return true, nil
	}
	ns := &unstructured.Unstructured{}
	ns.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, usererr.Wrap(err, "Cannot Read Namespace", fmt.Sprintf("Reading namespace %q (to match ExtensionConfig %s's namespaceSelector) failed.", namespace, ec.Name))
	}
	return sel.Matches(labels.Set(ns.GetLabels())), nil
}
