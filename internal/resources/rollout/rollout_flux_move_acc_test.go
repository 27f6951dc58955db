package rollout_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// TestAccRollout_fluxEngineMove: a rollout created delivering directly moves to Flux by an
// update (never -/+ replace), wave by wave, while a watcher polling every cluster never finds
// the app missing. Afterwards every cluster has its Kustomization, the app's objects are managed
// by kustomize-controller and no longer under the rollout's own field manager, the direct
// engine's records are gone from the workload clusters, nothing is in the invalid ledger, and a
// plan shows no change. Then it moves back to direct delivery the same way, with the same
// watcher: no Kustomization or OCIRepository is left, the objects are under the rollout's field
// manager alone (kustomize-controller's fields taken over), the Flux records are gone, a plan
// shows no change, and a new revision that changes what kustomize-controller had applied goes
// out delivering directly without a conflict.
func TestAccRollout_fluxEngineMove(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxmove")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	bundle := fluxBundle(name, "same", false)
	direct := rolloutConfig(f, name, allThree, bundle, `canary = ["staging-eu-1"]
  update_limit = "1"`)
	flux := rolloutConfig(f, name, allThree, bundle, fmt.Sprintf(`canary = ["staging-eu-1"]
  update_limit = "1"
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name)))
	w := newAppWatcher(t, ctx, f.WorkloadClient, clusters, client.ObjectKey{Namespace: name, Name: "settings"})
	managers := func(c string) ([]string, error) {
		var cm corev1.ConfigMap
		if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil {
			return nil, err
		}
		var out []string
		for _, m := range cm.ManagedFields {
			out = append(out, m.Manager)
		}
		return out, nil
	}
	onDirect := func(*terraform.State) error {
		for _, c := range clusters {
			m, err := managers(c)
			if err != nil || !slices.Contains(m, key.FieldManager()) {
				return fmt.Errorf("%s: the app's ConfigMap managers %v (%v), want %s", c, m, err, key.FieldManager())
			}
			if st := workloadRecords(t, f, c, name); st.Current == nil {
				return fmt.Errorf("%s: no direct records of the rollout", c)
			}
		}
		return nil
	}
	onFlux := func(*terraform.State) error {
		for _, c := range clusters {
			if _, err := acctest.FluxSource(ctx, mc, f.Namespace, key, c); err != nil {
				return err
			}
			m, err := managers(c)
			if err != nil || !slices.Contains(m, "kustomize-controller") || slices.Contains(m, key.FieldManager()) {
				return fmt.Errorf("%s: the app's ConfigMap managers %v (%v), want kustomize-controller and not %s", c, m, err, key.FieldManager())
			}
			if st := workloadRecords(t, f, c, name); st.Current != nil || st.Provisioning != nil || st.Backup != nil {
				return fmt.Errorf("%s: direct records left after the move to Flux: %+v", c, st)
			}
		}
		if l := ledgerOf(t, f, name); len(l) > 0 {
			return fmt.Errorf("the invalid ledger after the move: %+v, want empty", l)
		}
		return nil
	}
	backOnDirect := func(value string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			if err := onDirect(s); err != nil {
				return err
			}
			// The OCIRepositories are the namespace's, shared by the clusters on one artifact:
			// with no Kustomization left to name one, none may be left.
			if sources, err := acctest.FluxSources(ctx, mc, f.Namespace, key); err != nil || len(sources) > 0 {
				return fmt.Errorf("the rollout's OCIRepositories after the move back to direct delivery: %v (%v), want none", sources, err)
			}
			for _, c := range clusters {
				if err := mc.Get(ctx, client.ObjectKeyFromObject(kustomization(f, key, c)), kustomization(f, key, c)); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s: its Kustomization after the move back to direct delivery: %v, want it gone", c, err)
				}
				var cm corev1.ConfigMap
				if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil || cm.Data["value"] != value {
					return fmt.Errorf("%s: the app's ConfigMap: %v %v, want value %q", c, err, cm.Data, value)
				}
				if m, _ := managers(c); slices.Contains(m, fluxdelivery.ControllerFieldManager) {
					return fmt.Errorf("%s: the app's ConfigMap managers %v: kustomize-controller's fields not taken over", c, m)
				}
				st, err := records.NewWorkloadStore(mc, records.DefaultNamespace).Load(ctx, delivery.FluxRecordKey(key, c))
				if err != nil || st.Current != nil || st.Provisioning != nil {
					return fmt.Errorf("%s: Flux records left in the management cluster: %+v (%v)", c, st, err)
				}
			}
			if l := ledgerOf(t, f, name); len(l) > 0 {
				return fmt.Errorf("the invalid ledger after the move back: %+v, want empty", l)
			}
			return nil
		}
	}
	// Every cluster changes engine, so every cluster is in a wave, one at a time (update_limit).
	update := []plancheck.PlanCheck{plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster"))}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: direct, Check: onDirect},
			{
				PreConfig:        w.start,
				Config:           flux,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update},
				Check:            resource.ComposeTestCheckFunc(w.check("moving to Flux"), onFlux),
			},
			{Config: flux, PlanOnly: true},
			{
				PreConfig:        w.start,
				Config:           direct,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: update},
				Check:            resource.ComposeTestCheckFunc(w.check("moving back to direct delivery"), backOnDirect("same")),
			},
			{Config: direct, PlanOnly: true},
			{
				// The fields kustomize-controller applied are the rollout's now: changing them
				// delivering directly meets no conflict.
				Config: rolloutConfig(f, name, allThree, fluxBundle(name, "changed", false), `canary = ["staging-eu-1"]
  update_limit = "1"`),
				Check: backOnDirect("changed"),
			},
		},
	})
}

// appWatcher polls an object of the app in every cluster while an apply runs, and counts the
// polls that did not find it.
type appWatcher struct {
	t        *testing.T
	ctx      context.Context
	clients  func(string) (client.Client, error)
	clusters []string
	obj      client.ObjectKey

	mu       sync.Mutex
	stopCh   chan struct{}
	done     sync.WaitGroup
	missing  []string
	polls    int
	stopOnce *sync.Once
}

func newAppWatcher(t *testing.T, ctx context.Context, clients func(string) (client.Client, error), clusters []string, obj client.ObjectKey) *appWatcher {
	w := &appWatcher{t: t, ctx: ctx, clients: clients, clusters: clusters, obj: obj}
	t.Cleanup(w.stop)
	return w
}

// start polls until stop, every 200 ms.
func (w *appWatcher) start() {
	w.mu.Lock()
	w.stopCh, w.stopOnce, w.missing, w.polls = make(chan struct{}), &sync.Once{}, nil, 0
	stopCh := w.stopCh
	w.mu.Unlock()
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			for _, c := range w.clusters {
				wc, err := w.clients(c)
				if err == nil {
					err = wc.Get(w.ctx, w.obj, &corev1.ConfigMap{})
				}
				w.mu.Lock()
				w.polls++
				if apierrors.IsNotFound(err) {
					w.missing = append(w.missing, c+" at "+time.Now().Format(time.TimeOnly))
				}
				w.mu.Unlock()
			}
			select {
			case <-stopCh:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

func (w *appWatcher) stop() {
	w.mu.Lock()
	once, ch := w.stopOnce, w.stopCh
	w.mu.Unlock()
	if once != nil {
		once.Do(func() { close(ch) })
	}
	w.done.Wait()
}

// check stops the watcher and fails when it never polled, or found the app missing.
func (w *appWatcher) check(while string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		w.stop()
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.polls == 0 {
			return fmt.Errorf("the watcher never polled")
		}
		if len(w.missing) > 0 {
			return fmt.Errorf("the app was missing %d times of %d polls while %s: %v", len(w.missing), w.polls, while, w.missing)
		}
		return nil
	}
}

// TestAccRollout_fluxEngineMoveRefused: moving to Flux, one cluster refuses what kustomize-
// controller applies there (a ValidatingAdmissionPolicy denies the app's ConfigMap carrying
// Flux's labels), while the same content runs there delivering directly. That cluster stays on
// direct delivery (its objects never missing, its direct records and field manager in place, no
// Kustomization left), counted as failed within max_failures, and nothing is written to the
// invalid ledger: the content did not fail. The others move. Once the policy is gone, the next
// plan moves the last cluster, and a plan after it shows no change.
func TestAccRollout_fluxEngineMoveRefused(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxmover")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	const refusing = "prod-us-1"
	bundle := fluxBundle(name, "same", false)
	extra := `canary = ["staging-eu-1"]
  update_limit = "1"
  max_failures = "1"`
	direct := rolloutConfig(f, name, allThree, bundle, extra)
	flux := rolloutConfig(f, name, allThree, bundle, extra+fmt.Sprintf(`
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name)))
	w := newAppWatcher(t, ctx, f.WorkloadClient, clusters, client.ObjectKey{Namespace: name, Name: "settings"})
	policy := refuseFluxPolicy(name)
	wc := workloadClient(t, f, refusing)
	t.Cleanup(func() {
		for _, o := range policy {
			_ = wc.Delete(context.Background(), o)
		}
	})
	kustomization := func(c string) error {
		ks := &unstructured.Unstructured{}
		ks.SetGroupVersionKind(fluxdelivery.KustomizationKind)
		return mc.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: fluxdelivery.ObjectName(key, c)}, ks)
	}
	onEngines := func(direct ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for _, c := range clusters {
				st := workloadRecords(t, f, c, name)
				kerr := kustomization(c)
				if slices.Contains(direct, c) {
					if st.Current == nil || !apierrors.IsNotFound(kerr) {
						return fmt.Errorf("%s: want it on direct delivery: direct records %+v, Kustomization: %v", c, st.Current, kerr)
					}
					continue
				}
				if st.Current != nil || kerr != nil {
					return fmt.Errorf("%s: want it on Flux: direct records %+v, Kustomization: %v", c, st.Current, kerr)
				}
			}
			if l := ledgerOf(t, f, name); len(l) > 0 {
				return fmt.Errorf("the invalid ledger: %+v, want empty (the content never failed)", l)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: direct, Check: onEngines(clusters...)},
			{
				PreConfig: func() {
					for _, o := range policy {
						if err := wc.Create(ctx, o); err != nil {
							t.Fatalf("%s: %v", refusing, err)
						}
					}
					waitRefusesFlux(t, wc, name)
					w.start()
				},
				Config: flux,
				Check:  resource.ComposeTestCheckFunc(w.check("moving to Flux with one cluster refusing it"), onEngines(refusing)),
				// The cluster left on direct delivery is still to move: the next plan moves it.
				ExpectNonEmptyPlan: true,
			},
			{
				PreConfig: func() {
					for _, o := range policy {
						if err := wc.Delete(ctx, o); err != nil {
							t.Fatalf("%s: %v", refusing, err)
						}
					}
				},
				Config: flux,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("waves"), knownvalue.StringExact("1 wave of 1 cluster")),
				}},
				Check: onEngines(),
			},
			{Config: flux, PlanOnly: true},
		},
	})
}

// refuseFluxPolicy is a ValidatingAdmissionPolicy and its binding that deny, in namespace ns,
// ConfigMaps carrying the label kustomize-controller puts on what it applies.
func refuseFluxPolicy(ns string) []client.Object {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{
				"resourceRules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"},
					"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"}}},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
			},
			"validations": []any{map[string]any{
				"expression": "!has(object.metadata.labels) || !('kustomize.toolkit.fluxcd.io/name' in object.metadata.labels)",
				"message":    "this cluster takes no ConfigMap from Flux here",
			}},
		},
	}}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": ns},
		"spec":     map[string]any{"policyName": ns, "validationActions": []any{"Deny"}},
	}}
	return []client.Object{p, b}
}

// waitRefusesFlux waits until the policy denies a ConfigMap labelled as Flux labels what it
// applies (a policy takes a moment to be enforced).
func waitRefusesFlux(t *testing.T, wc client.Client, ns string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, "probe"
	cm.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "probe"}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err := wc.Create(context.Background(), cm.DeepCopy(), client.DryRunAll); err != nil && !apierrors.IsNotFound(err) {
			return
		}
	}
	t.Fatal("the ValidatingAdmissionPolicy was not enforced within 30s")
}

// TestAccRollout_fluxEngineMoveKilled: the CLI (and its provider) killed while the first cluster
// moves to Flux. Every cluster is then on exactly one engine (the one moving: still direct
// delivery's, its Flux change in flight; the others untouched) and runs the app. The next plan,
// once the killed holder's Lease expired, continues the move; its apply completes it (nothing in
// the ledger, no direct records left), and a plan after it shows no change.
func TestAccRollout_fluxEngineMoveKilled(t *testing.T) {
	acctest.OnOneLane(t, 1) // what a killed move leaves on each cluster; the move itself runs on both CLIs
	f := acctest.FluxFleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("fluxmovek")
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	fluxStore := records.NewWorkloadStore(mc, records.DefaultNamespace)
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// A short Lease: the next apply waits out the killed holder's.
	config := func(extra string) string {
		return "terraform {\n  required_providers {\n    gradual = { source = \"gradual-dev/gradual\" }\n  }\n}\n\n" + strings.Replace(rolloutConfig(f, name, allThree, fluxBundle(name, "same", false), `canary = ["staging-eu-1"]
  update_limit = "1"`+extra), "provider \"gradual\" {\n", "provider \"gradual\" {\n  lease_duration = \"20s\"\n", 1)
	}
	tf.writeConfig(config(""))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	tf.writeConfig(config(fmt.Sprintf(`
  delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name))))
	p := tf.start(false, "apply", "-auto-approve")
	defer p.kill()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if time.Now().After(deadline) {
			t.Fatal("staging-eu-1 was never recorded moving to Flux")
		}
		st, err := fluxStore.Load(ctx, delivery.FluxRecordKey(key, "staging-eu-1"))
		if err == nil && st.Provisioning != nil {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("apply ended before staging-eu-1 was moving:\n%s", p.result().output)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.kill()
	killed := time.Now()
	for _, c := range clusters {
		direct := workloadRecords(t, f, c, name)
		flux, err := fluxStore.Load(ctx, delivery.FluxRecordKey(key, c))
		if err != nil {
			t.Fatal(err)
		}
		onDirect, onFlux := direct.Current != nil, flux.Current != nil
		if onDirect == onFlux {
			t.Errorf("%s after the kill: direct records current %v, Flux records current %v; want exactly one engine in charge", c, revOf(direct.Current), revOf(flux.Current))
		}
		if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("%s: the app after the kill: %v", c, err)
		}
	}

	var out string
	for {
		res := tf.run(ctx, "plan", "-detailed-exitcode", "-out=resume.tfplan")
		if res.code == 2 {
			out = res.output
			break
		}
		if !strings.Contains(res.output, "Already Running") || time.Since(killed) > 3*time.Minute {
			t.Fatalf("plan after the kill exited %d:\n%s", res.code, res.output)
		}
		time.Sleep(5 * time.Second)
	}
	if !strings.Contains(out, "Delivery Engine Moves") || !strings.Contains(out, "updated in-place") {
		t.Errorf("the plan after the kill does not continue the move in place:\n%s", out)
	}
	for {
		res := tf.run(ctx, "apply", "-input=false", "resume.tfplan")
		if res.code == 0 {
			break
		}
		if !strings.Contains(res.output, "Already Running") || time.Since(killed) > 4*time.Minute {
			t.Fatalf("apply after the kill exited %d:\n%s", res.code, res.output)
		}
		time.Sleep(5 * time.Second)
		tf.mustRun(ctx, 2, "plan", "-detailed-exitcode", "-out=resume.tfplan")
	}
	for _, c := range clusters {
		if st := workloadRecords(t, f, c, name); st.Current != nil || st.Provisioning != nil {
			t.Errorf("%s: direct records left after the move: %+v", c, st)
		}
		if st, err := fluxStore.Load(ctx, delivery.FluxRecordKey(key, c)); err != nil || st.Current == nil || st.Provisioning != nil {
			t.Errorf("%s: Flux records %+v (%v), want current", c, st, err)
		}
	}
	if l := ledgerOf(t, f, name); len(l) > 0 {
		t.Errorf("the invalid ledger after the move: %+v, want empty", l)
	}
	tf.mustRun(ctx, 0, "plan", "-detailed-exitcode")
}
