package owners

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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

// connect builds a client for each endpoint and asks its Discovery hook what it serves; ready,
// when set, is asked first about every endpoint (see Planner.serviceReady). Any failure is an
// error: an extension the user names (or registers) that cannot be reached would silently
// change the plan.
func connect(ctx context.Context, endpoints []extension.Endpoint, opts extension.Options, ready func(context.Context, extension.Endpoint) error) ([]*Extension, error) {
	var out []*Extension
	for _, ep := range endpoints {
		if ready != nil {
			if err := ready(ctx, ep); err != nil {
				return nil, err
			}
		}
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

// fromExtensionConfigs are the endpoints of the management cluster's ExtensionConfig objects
// that serve namespace, sorted by name. Those installed behind a Service are called through the
// management API server's service proxy with proxy, the management cluster's REST config (see
// extension.ProxyURL); without it they are left out with a note.
func fromExtensionConfigs(ctx context.Context, c client.Client, proxy *rest.Config, namespace string) ([]extension.Endpoint, []string, error) {
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
		if ec.Spec.ClientConfig.Service != nil && (ec.Spec.ClientConfig.URL == nil || *ec.Spec.ClientConfig.URL == "") && proxy == nil {
			notes = append(notes, fmt.Sprintf("ExtensionConfig %s ignored: it names a Service and there is no management cluster connection to call it through", ec.Name))
			continue
		}
		ep, err := extension.FromExtensionConfig(&ec, proxy)
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
	case extension.KindStatus:
		hint = "Check the extension's logs; nothing was changed. For an extension installed behind a Service (called through the management API server's service proxy), " +
			"HTTP 403 means the provider's credentials may not create services/proxy in its namespace, and 502 or 503 that the API server could not reach it."
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

// handlerNames are the handlers of exts for one hook (see Extension), named as Cluster API names
// the handlers it registers: "<handler>.<extension>".
func handlerNames(exts []*Extension, handlers func(*Extension) []extension.Handler) []string {
	var out []string
	for _, e := range exts {
		for _, h := range handlers(e) {
			out = append(out, h.Name+"."+e.Name)
		}
	}
	return out
}

// oneHandlerPerHook says why Cluster API would stop, rather than update or replace, the machines
// of owner that change: Cluster API v1.14 calls exactly one extension handler per in-place hook
// and returns an error when it finds several, which fails the reconcile and stops the rollout
// (it then neither updates nor replaces a machine), in three places:
//
//   - KubeadmControlPlane asks CanUpdateMachine for the machine it would otherwise delete
//     (controlplane/kubeadm/reconcilers/kubeadmcontrolplane/inplace_canupdatemachine.go,
//     canUpdateMachine: "found multiple CanUpdateMachine hooks (…): only one hook is supported");
//   - MachineDeployment asks CanUpdateMachineSet for each old MachineSet eligible for an in-place
//     update, and an error there fails the whole rollout plan, so no MachineSet is scaled either
//     (core/reconcilers/machinedeployment/machinedeployment_canupdatemachineset.go,
//     canUpdateMachineSetInPlace, called from reconcileInPlaceUpdateIntent in
//     machinedeployment_rollout_rollingupdate.go); it never calls CanUpdateMachine;
//   - the Machine controller calls UpdateMachine for a machine marked for an in-place update
//     (core/reconcilers/machine/machine_controller_inplace_update.go, callUpdateMachineHook:
//     "found multiple UpdateMachine hooks" and, with none, "no extensions registered for
//     UpdateMachine hook").
//
// Cluster API counts the handlers of every ExtensionConfig that serves the owner's namespace,
// whatever their failurePolicy; exts are those (or the explicit extensions, which stand for
// them). "" means Cluster API calls at most one handler for each of the owner's hooks.
func oneHandlerPerHook(owner *Owner, exts []*Extension) string {
	type hook struct {
		name     string
		handlers func(*Extension) []extension.Handler
	}
	hooks := []hook{{extension.HookUpdateMachine, func(e *Extension) []extension.Handler { return e.Update }}}
	if owner != nil && owner.Kind == KindKubeadmControlPlane {
		hooks = append([]hook{{extension.HookCanUpdateMachine, func(e *Extension) []extension.Handler { return e.CanUpdate }}}, hooks...)
	} else {
		hooks = append([]hook{{extension.HookCanUpdateMachineSet, func(e *Extension) []extension.Handler { return e.CanUpdateSet }}}, hooks...)
	}
	for _, h := range hooks {
		names := handlerNames(exts, h.handlers)
		if len(names) > 1 {
			return fmt.Sprintf("Cluster API calls one extension per in-place hook and stops with \"found multiple %s hooks (%s): only one hook is supported\", "+
				"so it neither updates nor replaces this machine; keep one extension serving %s", h.name, strings.Join(names, ","), h.name)
		}
	}
	return ""
}

// noUpdateHandler says why Cluster API would stop half-way through updating a machine in
// place: no extension serves UpdateMachine, and the Machine controller answers "no extensions
// registered for UpdateMachine hook" after the machine was marked for the update.
func noUpdateHandler(exts []*Extension) string {
	if len(handlerNames(exts, func(e *Extension) []extension.Handler { return e.Update })) > 0 {
		return ""
	}
	return "an extension covers the change but none serves UpdateMachine: Cluster API would mark the machine for an in-place update and then stop " +
		"with \"no extensions registered for UpdateMachine hook\"; register the extension's UpdateMachine handler"
}

// serviceReady checks, before an extension installed behind a Service is first called, that
// the Service exists, has the port its ExtensionConfig names, and has a ready endpoint for it:
// the API server's service proxy (and Cluster API, from inside the cluster) can reach it only
// then. A failure is a plan-time error naming the ExtensionConfig and the Service. Endpoints
// that this provider may not read (RBAC) are not judged: the call itself then tells.
func (p *Planner) serviceReady(ctx context.Context, ep extension.Endpoint) error {
	svc := ep.Service
	if svc == nil {
		return nil
	}
	port := svc.Port
	if port == 0 {
		port = extension.DefaultServicePort
	}
	where := fmt.Sprintf("ExtensionConfig %s names Service %s/%s port %d", ep.Name, svc.Namespace, svc.Name, port)
	fail := func(why string) error {
		return usererr.New("Update Extension Not Reachable", where+", "+why+
			": neither this preview nor Cluster API can call the extension, and an in-place update would stop. Nothing was written.")
	}
	s := &unstructured.Unstructured{}
	s.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Service"})
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return fail("which does not exist")
	case apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return usererr.Wrap(err, "Cannot Read Extension Service", fmt.Sprintf("Reading Service %s/%s (%s) failed.", svc.Namespace, svc.Name, where))
	}
	if t, _, _ := unstructured.NestedString(s.Object, "spec", "type"); t == "ExternalName" {
		return fail("an ExternalName Service, which the API server's service proxy cannot reach")
	}
	ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
	portName, found := "", false
	var have []string
	for _, x := range ports {
		m, _ := x.(map[string]any)
		n, _, _ := unstructured.NestedInt64(m, "port")
		have = append(have, fmt.Sprint(n))
		if n == int64(port) {
			portName, _, _ = unstructured.NestedString(m, "name")
			found = true
		}
	}
	if !found {
		return fail("which has no such port (it has " + orNone(have) + ")")
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSliceList"})
	err = p.Client.List(ctx, list, client.InNamespace(svc.Namespace), client.MatchingLabels{"kubernetes.io/service-name": svc.Name})
	switch {
	case apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return usererr.Wrap(err, "Cannot List Extension Endpoints", fmt.Sprintf("Listing the EndpointSlices of Service %s/%s (%s) failed.", svc.Namespace, svc.Name, where))
	}
	for _, sl := range list.Items {
		if !slicePorts(sl, portName) {
			continue
		}
		eps, _, _ := unstructured.NestedSlice(sl.Object, "endpoints")
		for _, e := range eps {
			m, _ := e.(map[string]any)
			// EndpointSlice: a nil ready condition is to be read as ready.
			if ready, found, _ := unstructured.NestedBool(m, "conditions", "ready"); !found || ready {
				return nil
			}
		}
	}
	return fail("which has no ready endpoint (no EndpointSlice labelled kubernetes.io/service-name=" + svc.Name + " lists a ready address for it)")
}

// slicePorts reports whether an EndpointSlice serves the Service port named name ("" for a
// Service's single unnamed port).
func slicePorts(sl unstructured.Unstructured, name string) bool {
	ports, _, _ := unstructured.NestedSlice(sl.Object, "ports")
	for _, x := range ports {
		m, _ := x.(map[string]any)
		if n, _, _ := unstructured.NestedString(m, "name"); n == name {
			return true
		}
	}
	return false
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
