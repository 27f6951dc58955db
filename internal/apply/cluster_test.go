package apply

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fieldpath"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestCluster runs the Applier against a real kube-apiserver: one kwok workload cluster of
// the test bed, where Deployments really become available (or really do not). The subtests
// share the cluster and run in order. It needs the toolchain from `make tools`.
func TestCluster(t *testing.T) {
	if _, err := testbed.ToolchainFromEnv(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	if testing.Short() {
		t.Skip("skipping in -short mode: starts two control planes")
	}
	f := testbed.Start(t, testbed.Options{Workloads: []testbed.WorkloadSpec{{Name: "apply-w1", Ready: true}}})
	cfg, err := f.Workloads["apply-w1"].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, Options{PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{}) // to look and to play the other tools
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "apply-demo"

	bundle := func(data string) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{
			namespaceObj(ns),
			configMap(ns, "settings", map[string]any{"a": data}),
			deploymentObj(ns, "web", 2, nil, 0),
		}
	}
	actions := func(res *Result) map[string]Action {
		out := map[string]Action{}
		for _, c := range res.Changes {
			out[c.Object.String()] = c.Action
		}
		return out
	}
	expectActions := func(t *testing.T, res *Result, want map[string]Action) {
		t.Helper()
		if got := actions(res); !mapsEqual(got, want) {
			t.Errorf("actions = %v, want %v", got, want)
		}
	}

	t.Run("preview and existing ask nothing of the objects of a namespace the cluster lacks", func(t *testing.T) {
		counted := rest.CopyConfig(cfg)
		var mu sync.Mutex
		var inNamespace []string
		counted.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if strings.Contains(req.URL.Path, "/namespaces/"+ns+"/") {
					mu.Lock()
					inNamespace = append(inNamespace, req.Method+" "+req.URL.Path)
					mu.Unlock()
				}
				return rt.RoundTrip(req)
			})
		}
		b, err := New(counted, Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Preview(ctx, bundle("1"))
		if err != nil {
			t.Fatal(err)
		}
		if want := (PreviewCounts{Created: 3, Unchecked: 2}); res.Counts != want {
			t.Errorf("preview counts = %+v, want %+v", res.Counts, want)
		}
		existing, err := b.Existing(ctx, bundle("1"))
		if err != nil || len(existing) != 0 {
			t.Errorf("Existing = %v, %v; want nothing", existing, err)
		}
		if len(inNamespace) > 0 {
			t.Errorf("asked about objects of the missing namespace: %v", inNamespace)
		}
	})

	t.Run("apply creates, wait sees it ready", func(t *testing.T) {
		res, err := a.Apply(ctx, bundle("1"))
		if err != nil {
			t.Fatal(err)
		}
		expectActions(t, res, map[string]Action{
			"Namespace apply-demo": Created, "ConfigMap apply-demo/settings": Created, "Deployment apply-demo/web": Created,
		})
		if got := res.Changes[0].Object.String(); got != "Namespace apply-demo" {
			t.Errorf("first applied %s, want the Namespace", got)
		}
		start := time.Now()
		if err := a.Wait(ctx, bundle("1"), 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Logf("ready in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("apply again leaves everything unchanged", func(t *testing.T) {
		res, err := a.Apply(ctx, bundle("1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed() || res.Count(Unchanged) != 3 {
			t.Errorf("second apply: %v", res.Changes)
		}
	})

	t.Run("a change configures only what changed", func(t *testing.T) {
		res, err := a.Apply(ctx, bundle("2"))
		if err != nil {
			t.Fatal(err)
		}
		expectActions(t, res, map[string]Action{
			"Namespace apply-demo": Unchanged, "ConfigMap apply-demo/settings": Configured, "Deployment apply-demo/web": Unchanged,
		})
	})

	t.Run("drift: a deleted and a hand-edited object, repaired by apply", func(t *testing.T) {
		if err := kube.Delete(ctx, configMap(ns, "settings", nil)); err != nil {
			t.Fatal(err)
		}
		// kubectl edit: an update (not an apply) of a field the bundle sets, and a label it does not set.
		edit := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"x"}},"spec":{"replicas":3}}`))
		if err := kube.Patch(ctx, deploymentObj(ns, "web", 0, nil, 0), edit, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		drift, err := a.Drift(ctx, bundle("2"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range drift {
			got = append(got, d.String())
		}
		want := []string{"ConfigMap apply-demo/settings: missing", "Deployment apply-demo/web: modified (.spec.replicas)"}
		if !slices.Equal(got, want) {
			t.Errorf("Drift = %q, want %q", got, want)
		}

		res, err := a.Apply(ctx, bundle("2"))
		if err != nil {
			t.Fatalf("apply without ForceConflicts must take back hand-edited fields: %v", err)
		}
		expectActions(t, res, map[string]Action{
			"Namespace apply-demo": Unchanged, "ConfigMap apply-demo/settings": Created, "Deployment apply-demo/web": Configured,
		})
		if drift, err := a.Drift(ctx, bundle("2")); err != nil || len(drift) != 0 {
			t.Errorf("Drift after repair = %v, %v; want none", drift, err)
		}
		live := deploymentObj(ns, "web", 0, nil, 0)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); r != 2 || live.GetLabels()["team"] != "x" {
			t.Errorf("after repair replicas = %d (want 2), labels = %v (want team=x kept: not ours)", r, live.GetLabels())
		}
	})

	t.Run("a field another applier owns is a conflict unless forced", func(t *testing.T) {
		other := configMap(ns, "settings", map[string]any{"a": "theirs"})
		if err := kube.Patch(ctx, other, client.Apply, client.FieldOwner("other-tool"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		next := bundle("2")
		next[2].SetAnnotations(map[string]string{"changed": "yes"}) // applied only if nothing conflicts
		_, err := a.Apply(ctx, next)
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Object.String() != "ConfigMap apply-demo/settings" ||
			len(ce.Conflicts) != 1 || ce.Conflicts[0].Manager != "other-tool" || ce.Conflicts[0].Field != ".data.a" {
			t.Fatalf("err = %v, want a ConflictError on .data.a with other-tool", err)
		}
		t.Logf("conflict: %v", err)
		live := deploymentObj(ns, "web", 0, nil, 0)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			t.Fatal(err)
		}
		if live.GetAnnotations()["changed"] != "" {
			t.Error("the Deployment was applied although its stage had a conflict")
		}

		forced, err := New(cfg, Options{ForceConflicts: true, PollInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		res, err := forced.Apply(ctx, bundle("2"))
		if err != nil {
			t.Fatal(err)
		}
		expectActions(t, res, map[string]Action{
			"Namespace apply-demo": Unchanged, "ConfigMap apply-demo/settings": Configured, "Deployment apply-demo/web": Unchanged,
		})
	})

	t.Run("ignored fields: another manager's replicas stay, no drift; an ignored field nobody else owns keeps its live value", func(t *testing.T) {
		replicas := fieldpath.MustParse(".spec.replicas")
		ignoring := a.WithIgnore(Ignore{{Kind: "Deployment", Paths: []fieldpath.Path{replicas}}})
		// an HPA: a server-side apply of .spec.replicas by another field manager
		hpa := deploymentObj(ns, "web", 0, nil, 0)
		hpa.Object["spec"] = map[string]any{"replicas": int64(4)}
		if err := kube.Patch(ctx, hpa, client.Apply, client.FieldOwner("hpa-controller"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		if drift, err := ignoring.Drift(ctx, bundle("2")); err != nil || len(drift) != 0 {
			t.Errorf("Drift ignoring .spec.replicas = %v, %v; want none", drift, err)
		}
		if drift, err := a.Drift(ctx, bundle("2")); err != nil || len(drift) != 1 || drift[0].String() != "Deployment apply-demo/web: modified (.spec.replicas)" {
			t.Errorf("Drift not ignoring = %v, %v; want .spec.replicas modified", drift, err)
		}
		next := bundle("2")
		next[2].SetAnnotations(map[string]string{"changed": "yes"})
		if _, err := ignoring.Apply(ctx, next); err != nil {
			t.Fatalf("apply leaving .spec.replicas to its owner must not conflict: %v", err)
		}
		live := deploymentObj(ns, "web", 0, nil, 0)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); r != 4 || live.GetAnnotations()["changed"] != "yes" {
			t.Errorf("after apply replicas = %d (want 4, the HPA's), annotations = %v (want changed=yes)", r, live.GetAnnotations())
		}
		// The field another manager set is no longer ours: the HPA alone owns it.
		for _, mf := range live.GetManagedFields() {
			if mf.Manager == a.FieldManager() && mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:replicas"`) {
				t.Errorf("%s still owns .spec.replicas: %s", mf.Manager, mf.FieldsV1.GetRawString())
			}
		}

		// An ignored field only we own (the ConfigMap's data, which nobody else touched) keeps the
		// live value instead of being dropped by the API server.
		data := fieldpath.MustParse(".data.a")
		dataIgnoring := a.WithIgnore(Ignore{
			{Kind: "Deployment", Paths: []fieldpath.Path{replicas}},
			{Kind: "ConfigMap", Name: "settings", Paths: []fieldpath.Path{data}},
		})
		if _, err := dataIgnoring.Apply(ctx, bundle("3")); err != nil {
			t.Fatal(err)
		}
		cm := configMap(ns, "settings", nil)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(cm.Object, "data", "a"); v != "2" {
			t.Errorf("ignored .data.a = %q, want the live value \"2\" kept", v)
		}
		// Without the rule, the HPA's server-side apply is a conflict; forced, apply takes the
		// replicas back (and the later subtests start from the bundle as applied).
		var ce *ConflictError
		if _, err := a.Apply(ctx, bundle("2")); !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Manager != "hpa-controller" {
			t.Fatalf("apply without the rule: err = %v, want a conflict with hpa-controller", err)
		}
		forced, err := New(cfg, Options{ForceConflicts: true, PollInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := forced.Apply(ctx, bundle("2")); err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); r != 2 {
			t.Errorf("after an apply without the rule replicas = %d, want 2", r)
		}
	})

	t.Run("prune deletes what the bundle dropped, keeps what says so", func(t *testing.T) {
		kept := configMap(ns, "kept", map[string]any{"k": "v"})
		kept.SetAnnotations(map[string]string{PruneAnnotation: "disabled"})
		previous := append(bundle("2"), kept)
		if _, err := a.Apply(ctx, previous); err != nil {
			t.Fatal(err)
		}
		// In the inventory, but someone else's: deleted and recreated by another tool.
		replaced := configMap(ns, "replaced", map[string]any{"k": "v"})
		if err := kube.Create(ctx, replaced, client.FieldOwner("other-tool")); err != nil {
			t.Fatal(err)
		}
		previous = append(previous, replaced)
		next := []*unstructured.Unstructured{namespaceObj(ns), deploymentObj(ns, "web", 2, nil, 0)}
		res, err := a.Prune(ctx, InventoryOf(previous), next)
		if err != nil {
			t.Fatal(err)
		}
		var keptNames []string
		for _, k := range res.Kept {
			keptNames = append(keptNames, k.String())
		}
		wantKept := []string{
			"ConfigMap apply-demo/kept: kept: gradual.dev/prune: disabled",
			`ConfigMap apply-demo/replaced: kept: managed by field manager "other-tool", not by "gradual"`,
		}
		if len(res.Deleted) != 1 || res.Deleted[0].String() != "ConfigMap apply-demo/settings" || !slices.Equal(keptNames, wantKept) {
			t.Errorf("Prune deleted %v, kept %q; want settings deleted and kept %q", res.Deleted, keptNames, wantKept)
		}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, configMap(ns, "settings", nil)); !apierrors.IsNotFound(err) {
			t.Errorf("settings after prune: %v, want NotFound", err)
		}
		for _, o := range []client.Object{kept, replaced} {
			if err := kube.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	})

	stuck := deploymentObj(ns, "stuck", 1, map[string]any{"gradual.dev/no-such-node": "true"}, 10)
	pending := deploymentObj(ns, "pending", 1, map[string]any{"gradual.dev/no-such-node": "true"}, 0)
	t.Run("wait fails fast on a deployment that cannot become available", func(t *testing.T) {
		// pending stays InProgress for its default 600s deadline: only FailFast ends the wait early.
		objs := []*unstructured.Unstructured{namespaceObj(ns), deploymentObj(ns, "web", 2, nil, 0), stuck, pending}
		if _, err := a.Apply(ctx, objs); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := a.Wait(ctx, objs, 3*time.Minute)
		elapsed := time.Since(start)
		t.Logf("failed after %s: %v", elapsed.Round(time.Millisecond), err)
		var nre *NotReadyError
		if !errors.As(err, &nre) || nre.Timeout != 0 || len(nre.Objects) != 2 {
			t.Fatalf("err = %#v, want a NotReadyError for a failed and a pending object", err)
		}
		if s := nre.Objects[0]; s.Object.String() != "Deployment apply-demo/stuck" || s.Status != "Failed" || !strings.HasPrefix(s.Message, "ProgressDeadlineExceeded: ") {
			t.Errorf("first status = %+v, want Deployment apply-demo/stuck Failed: ProgressDeadlineExceeded", s)
		}
		if s := nre.Objects[1]; s.Object.String() != "Deployment apply-demo/pending" || s.Status != "InProgress" {
			t.Errorf("second status = %+v, want Deployment apply-demo/pending InProgress", s)
		}
		if elapsed > time.Minute {
			t.Errorf("took %s: it should stop near the 10s progress deadline, not wait out the timeout", elapsed)
		}
	})

	t.Run("wait times out with each object's status", func(t *testing.T) {
		if _, err := a.Apply(ctx, []*unstructured.Unstructured{pending}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := a.Wait(ctx, []*unstructured.Unstructured{deploymentObj(ns, "web", 2, nil, 0), pending}, 3*time.Second)
		t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
		var nre *NotReadyError
		if !errors.As(err, &nre) || nre.Timeout != 3*time.Second || len(nre.Objects) != 1 ||
			nre.Objects[0].Object.Name != "pending" || nre.Objects[0].Status != "InProgress" || nre.Objects[0].Message == "" {
			t.Errorf("err = %v, want pending InProgress after 3s", err)
		}
	})

	t.Run("cancelling ctx stops wait promptly", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		err := a.Wait(cctx, []*unstructured.Unstructured{pending}, 5*time.Minute)
		elapsed := time.Since(start)
		t.Logf("returned %s after cancel: %v", (elapsed - time.Second).Round(time.Millisecond), err)
		var nre *NotReadyError
		if !errors.Is(err, context.Canceled) || errors.As(err, &nre) {
			t.Errorf("err = %v, want context.Canceled and no verdict on the objects", err)
		}
		if elapsed > 3*time.Second {
			t.Errorf("returned %s after start, cancelled at 1s", elapsed)
		}
	})

	t.Run("check refuses a kind no CRD defines and a missing namespace, apply changes nothing", func(t *testing.T) {
		objs := []*unstructured.Unstructured{
			configMap(ns, "before-check", map[string]any{"x": "y"}),
			widget(ns, "w1"),
			configMap("no-such-ns", "c", nil),
		}
		// A fresh Applier: its first look-up of an unknown group goes another way in the REST mapper.
		fresh, err := New(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = fresh.Check(ctx, objs)
		var ce *CheckError
		if !errors.As(err, &ce) || len(ce.MissingKinds) != 1 || ce.MissingKinds[0].Kind != "Widget" ||
			len(ce.Namespaces) != 1 || ce.Namespaces[0].Namespace != "no-such-ns" {
			t.Fatalf("Check = %v, want the Widget kind and namespace no-such-ns", err)
		}
		t.Logf("check: %v", err)
		if _, err := a.Apply(ctx, objs); !errors.As(err, &ce) {
			t.Errorf("Apply = %v, want the CheckError", err)
		}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "before-check"}, configMap(ns, "before-check", nil)); !apierrors.IsNotFound(err) {
			t.Errorf("before-check: %v, want NotFound: nothing may be applied", err)
		}
	})

	t.Run("a bundle that brings its CRD applies with its custom resources", func(t *testing.T) {
		objs := []*unstructured.Unstructured{widget(ns, "w1"), widgetCRD()}
		if err := a.Check(ctx, objs); err != nil {
			t.Fatal(err)
		}
		res, err := a.Apply(ctx, objs)
		if err != nil {
			t.Fatal(err)
		}
		expectActions(t, res, map[string]Action{
			"CustomResourceDefinition widgets.example.gradual.dev": Created, "Widget apply-demo/w1": Created,
		})
		if err := a.Wait(ctx, objs, time.Minute); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an object made by someone else is found, reverted to its saved content and given back", func(t *testing.T) {
		before := configMap(ns, "adopted", map[string]any{"a": "before", "keep": "x"})
		if err := kube.Create(ctx, before.DeepCopy(), client.FieldOwner("kubectl-create")); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = kube.Delete(context.WithoutCancel(ctx), before.DeepCopy()) }()
		ours := configMap(ns, "adopted", map[string]any{"a": "ours", "added": "y"})
		found, err := a.Existing(ctx, []*unstructured.Unstructured{ours, configMap(ns, "absent", nil)})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].Object.String() != "ConfigMap apply-demo/adopted" ||
			!slices.Equal(found[0].Managers, []string{"kubectl-create"}) || !found[0].Foreign(DefaultFieldManager) || len(found[0].Saved) == 0 {
			t.Fatalf("Existing = %+v, want the adopted ConfigMap, managed by kubectl-create, with its content", found)
		}
		live := func() (map[string]string, []string) {
			t.Helper()
			cm := configMap(ns, "adopted", nil)
			if err := kube.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
				t.Fatal(err)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			return data, managersOf(cm.GetManagedFields())
		}
		if _, err := a.Apply(ctx, []*unstructured.Unstructured{ours}); err != nil {
			t.Fatal(err)
		}
		saved := &unstructured.Unstructured{}
		if err := saved.UnmarshalJSON(found[0].Saved); err != nil {
			t.Fatal(err)
		}
		if err := a.Revert(ctx, []*unstructured.Unstructured{saved}); err != nil {
			t.Fatal(err)
		}
		data, managers := live()
		if !maps.Equal(data, map[string]string{"a": "before", "keep": "x"}) || slices.Contains(managers, DefaultFieldManager) {
			t.Errorf("after Revert: data %v, managers %v; want the content from before and no field of ours", data, managers)
		}

		if _, err := a.Apply(ctx, []*unstructured.Unstructured{ours}); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx, []ObjectRef{RefOf(ours)}); err != nil {
			t.Fatal(err)
		}
		data, managers = live()
		if data["a"] != "ours" || data["added"] != "y" || slices.Contains(managers, DefaultFieldManager) || !slices.Contains(managers, "kubectl-create") {
			t.Errorf("after Release: data %v, managers %v; want the content as applied, our field manager gone, the other kept", data, managers)
		}
		res, err := a.Delete(ctx, Inventory{RefOf(ours)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Deleted) != 0 || len(res.Kept) != 1 {
			t.Errorf("Delete of a released object: %+v, want it kept", res)
		}

		// A Namespace: its saved content (spec.finalizers, the name label the API server sets)
		// applies back without error.
		nsBefore := namespaceObj("apply-adopted")
		if err := kube.Create(ctx, nsBefore.DeepCopy(), client.FieldOwner("kubectl-create")); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = kube.Delete(context.WithoutCancel(ctx), nsBefore.DeepCopy()) }()
		nsOurs := namespaceObj("apply-adopted")
		nsOurs.SetLabels(map[string]string{"team": "ours"})
		found, err = a.Existing(ctx, []*unstructured.Unstructured{nsOurs})
		if err != nil || len(found) != 1 {
			t.Fatalf("Existing(namespace) = %+v, %v", found, err)
		}
		if _, err := a.Apply(ctx, []*unstructured.Unstructured{nsOurs}); err != nil {
			t.Fatal(err)
		}
		nsSaved := &unstructured.Unstructured{}
		if err := nsSaved.UnmarshalJSON(found[0].Saved); err != nil {
			t.Fatal(err)
		}
		if err := a.Revert(ctx, []*unstructured.Unstructured{nsSaved}); err != nil {
			t.Fatal(err)
		}
		ns := namespaceObj("apply-adopted")
		if err := kube.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			t.Fatal(err)
		}
		if ns.GetLabels()["team"] != "" || slices.Contains(managersOf(ns.GetManagedFields()), DefaultFieldManager) {
			t.Errorf("namespace after Revert: labels %v, managers %v; want our label gone and no field of ours", ns.GetLabels(), managersOf(ns.GetManagedFields()))
		}
	})

	t.Run("delete keeps what holds others' objects, then removes everything", func(t *testing.T) {
		all := []*unstructured.Unstructured{
			namespaceObj(ns), deploymentObj(ns, "web", 2, nil, 0), stuck, pending, widgetCRD(), widget(ns, "w1"),
			namespaceObj("default"), configMap(ns, "settings", nil), // already gone: fine
		}
		inv := InventoryOf(all)
		foreignCM := configMap(ns, "foreign", map[string]any{"x": "y"})
		foreignWidget := widget("default", "foreign")
		for _, o := range []client.Object{foreignCM, foreignWidget} {
			if err := kube.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		res, err := a.Delete(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		var deleted, kept []string
		for _, r := range res.Deleted {
			deleted = append(deleted, r.String())
		}
		for _, k := range res.Kept {
			kept = append(kept, k.String())
		}
		wantDeleted := []string{"Widget apply-demo/w1", "Deployment apply-demo/pending", "Deployment apply-demo/stuck", "Deployment apply-demo/web"}
		wantKept := []string{
			"Namespace apply-demo: kept: holds objects not being deleted: ConfigMap apply-demo/foreign",
			"Namespace default: kept: system namespace",
			"CustomResourceDefinition widgets.example.gradual.dev: kept: has custom resources not being deleted: Widget default/foreign",
		}
		if !slices.Equal(deleted, wantDeleted) || !slices.Equal(kept, wantKept) {
			t.Errorf("Delete:\n deleted %q\n    want %q\n kept %q\n want %q", deleted, wantDeleted, kept, wantKept)
		}

		for _, o := range []client.Object{foreignCM, foreignWidget} {
			if err := kube.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		res, err = a.Delete(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		deleted = nil
		for _, r := range res.Deleted {
			deleted = append(deleted, r.String())
		}
		if want := []string{"Namespace apply-demo", "CustomResourceDefinition widgets.example.gradual.dev"}; !slices.Equal(deleted, want) || len(res.Kept) != 1 {
			t.Errorf("second Delete = %q, kept %v; want %q and the default namespace kept", deleted, res.Kept, want)
		}
		for _, o := range []*unstructured.Unstructured{namespaceObj(ns), widgetCRD()} {
			err := kube.Get(ctx, client.ObjectKeyFromObject(o), o)
			if err == nil && o.GetDeletionTimestamp() == nil {
				t.Errorf("%s still there and not being deleted", RefOf(o))
			} else if err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
	})

	t.Run("per-rollout field managers: legacy fields taken over, two rollouts conflict, orphans go back to the legacy manager", func(t *testing.T) {
		const ns = "apply-owners"
		t.Cleanup(func() { _ = kube.Delete(context.Background(), namespaceObj(ns)) })
		teamA := records.Key{Kind: "rollout", Namespace: "team-a", Name: "web"}
		teamB := records.Key{Kind: "rollout", Namespace: "team-b", Name: "web"}
		rollA, rollB := a.WithFieldManager(teamA.FieldManager()), a.WithFieldManager(teamB.FieldManager())
		if a.FieldManager() != DefaultFieldManager || rollA.FieldManager() != "gradual/rollout/team-a/web" {
			t.Fatalf("managers: %q, %q", a.FieldManager(), rollA.FieldManager())
		}
		managers := func(t *testing.T, name string) []string {
			t.Helper()
			live := configMap(ns, name, nil)
			if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
				t.Fatal(err)
			}
			return managersOf(live.GetManagedFields())
		}
		data := func(t *testing.T, name string) map[string]string {
			t.Helper()
			live := configMap(ns, name, nil)
			if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
				t.Fatal(err)
			}
			d, _, _ := unstructured.NestedStringMap(live.Object, "data")
			return d
		}

		// Applied before rollouts had managers of their own: the legacy manager owns it all.
		if _, err := a.Apply(ctx, []*unstructured.Unstructured{
			namespaceObj(ns), configMap(ns, "shared", map[string]any{"a": "1", "b": "1"}), configMap(ns, "legacy-only", map[string]any{"x": "1"}),
		}); err != nil {
			t.Fatal(err)
		}
		// The rollout's first apply with its own manager takes the legacy fields over, so
		// dropping .data.b removes it instead of leaving it to the legacy manager.
		res, err := rollA.Apply(ctx, []*unstructured.Unstructured{namespaceObj(ns), configMap(ns, "shared", map[string]any{"a": "1"})})
		if err != nil {
			t.Fatal(err)
		}
		if got := actions(res)["ConfigMap apply-owners/shared"]; got != Configured {
			t.Errorf("migrating apply: shared %s, want configured", got)
		}
		if d, m := data(t, "shared"), managers(t, "shared"); !maps.Equal(d, map[string]string{"a": "1"}) || !slices.Equal(m, []string{rollA.FieldManager()}) {
			t.Errorf("after the migrating apply: data %v (want only a=1: b dropped), managers %v (want only %s)", d, m, rollA.FieldManager())
		}

		// Another rollout setting a field the first owns, to another value: a conflict naming
		// the first rollout, forced or not; nothing changes.
		for _, b := range []*Applier{rollB, rollB.WithForceConflicts(true)} {
			_, err := b.Apply(ctx, []*unstructured.Unstructured{namespaceObj(ns), configMap(ns, "shared", map[string]any{"a": "2"})})
			var ce *ConflictError
			if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Manager != rollA.FieldManager() || ce.Conflicts[0].Field != ".data.a" ||
				!strings.Contains(err.Error(), ".data.a owned by rollout team-a/web") {
				t.Fatalf("second rollout (force %v): err = %v, want a conflict on .data.a owned by rollout team-a/web", b.ForceConflicts(), err)
			}
			t.Logf("conflict: %v", err)
		}
		if d := data(t, "shared"); d["a"] != "1" {
			t.Errorf("after the refused applies: data %v, want a=1", d)
		}

		// Delete: an object only the legacy manager owns is ours; one another rollout owns is not.
		res2, err := rollB.Delete(ctx, Inventory{RefOf(configMap(ns, "legacy-only", nil)), RefOf(configMap(ns, "shared", nil))})
		if err != nil {
			t.Fatal(err)
		}
		if len(res2.Deleted) != 1 || res2.Deleted[0].Name != "legacy-only" || len(res2.Kept) != 1 || res2.Kept[0].Object.Name != "shared" ||
			!strings.Contains(res2.Kept[0].Reason, rollA.FieldManager()) {
			t.Errorf("Delete by the second rollout: deleted %v, kept %v; want legacy-only deleted, shared kept as the first rollout's", res2.Deleted, res2.Kept)
		}

		// Orphaned by the first rollout, the object goes back to the legacy manager, which the
		// next rollout takes over without a conflict.
		if err := rollA.Orphan(ctx, []ObjectRef{RefOf(configMap(ns, "shared", nil))}); err != nil {
			t.Fatal(err)
		}
		if m := managers(t, "shared"); !slices.Equal(m, []string{DefaultFieldManager}) {
			t.Errorf("after Orphan: managers %v, want only the legacy one", m)
		}
		if _, err := rollB.Apply(ctx, []*unstructured.Unstructured{namespaceObj(ns), configMap(ns, "shared", map[string]any{"a": "2"})}); err != nil {
			t.Fatalf("apply of an orphaned object: %v", err)
		}
		if d, m := data(t, "shared"), managers(t, "shared"); d["a"] != "2" || !slices.Equal(m, []string{rollB.FieldManager()}) {
			t.Errorf("after the second rollout took it: data %v, managers %v", d, m)
		}

		// Applied by kustomize-controller too (the rollout delivered through Flux, same value, and
		// Flux's label), then forgotten once Flux let go: the rollout owns the value alone, the
		// label stays, owned by no one, and a new value meets no conflict.
		flux := a.WithFieldManager("kustomize-controller").WithForceConflicts(true)
		labelled := configMap(ns, "shared", map[string]any{"a": "2"})
		labelled.SetLabels(map[string]string{"kustomize.toolkit.fluxcd.io/name": "web"})
		if _, err := flux.Apply(ctx, []*unstructured.Unstructured{namespaceObj(ns), labelled}); err != nil {
			t.Fatal(err)
		}
		if m := managers(t, "shared"); !slices.Contains(m, "kustomize-controller") {
			t.Fatalf("after Flux applied: managers %v", m)
		}
		if err := rollB.Forget(ctx, []ObjectRef{RefOf(labelled)}, "kustomize-controller"); err != nil {
			t.Fatal(err)
		}
		if m := managers(t, "shared"); !slices.Equal(m, []string{rollB.FieldManager()}) {
			t.Errorf("after Forget: managers %v, want only %s", m, rollB.FieldManager())
		}
		if _, err := rollB.Apply(ctx, []*unstructured.Unstructured{namespaceObj(ns), configMap(ns, "shared", map[string]any{"a": "3"})}); err != nil {
			t.Fatalf("apply of a new value after Forget: %v", err)
		}
		live := configMap(ns, "shared", nil)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil || live.GetLabels()["kustomize.toolkit.fluxcd.io/name"] != "web" {
			t.Errorf("after the new value: labels %v (%v), want Flux's left as they were", live.GetLabels(), err)
		}
		if d := data(t, "shared"); d["a"] != "3" {
			t.Errorf("after the new value: data %v", d)
		}
	})
}

func mapsEqual(a, b map[string]Action) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func namespaceObj(name string) *unstructured.Unstructured { return obj("v1", "Namespace", "", name) }

func configMap(namespace, name string, data map[string]any) *unstructured.Unstructured {
	u := obj("v1", "ConfigMap", namespace, name)
	if data != nil {
		u.Object["data"] = data
	}
	return u
}

// deploymentObj is a Deployment of a busybox pod (kwok runs no images). A nodeSelector that
// matches no Node keeps it from ever becoming available; progressDeadline 0 leaves the default.
func deploymentObj(namespace, name string, replicas int64, nodeSelector map[string]any, progressDeadline int64) *unstructured.Unstructured {
	u := obj("apps/v1", "Deployment", namespace, name)
	labels := map[string]any{"app": name}
	podSpec := map[string]any{"containers": []any{map[string]any{
		"name": "main", "image": "busybox:1.36", "command": []any{"sleep", "infinity"},
	}}}
	if nodeSelector != nil {
		podSpec["nodeSelector"] = nodeSelector
	}
	spec := map[string]any{
		"replicas": replicas,
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": podSpec},
	}
	if progressDeadline > 0 {
		spec["progressDeadlineSeconds"] = progressDeadline
	}
	if replicas > 0 {
		u.Object["spec"] = spec
	}
	return u
}

func widgetCRD() *unstructured.Unstructured {
	u := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.gradual.dev")
	u.Object["spec"] = map[string]any{
		"group": "example.gradual.dev",
		"scope": "Namespaced",
		"names": map[string]any{"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
		"versions": []any{map[string]any{
			"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
		}},
	}
	return u
}

func widget(namespace, name string) *unstructured.Unstructured {
	u := obj("example.gradual.dev/v1", "Widget", namespace, name)
	u.Object["spec"] = map[string]any{"size": int64(3)}
	return u
}
