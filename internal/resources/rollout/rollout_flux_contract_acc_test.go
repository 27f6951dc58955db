package rollout_test

import (
	"context"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// TestAccRollout_fluxPreexistingNamespace: a Namespace that exists in every cluster before the
// rollout, holding another team's ConfigMap, is declared in the bundle delivered through Flux.
// Create succeeds; destroy deletes the Kustomizations and Flux prunes the rollout's own ConfigMap,
// but never the Namespace (Flux's per-object prune opt-out, set in the artifact), so the other
// team's ConfigMap survives. Delivering directly the same holds by the pre-existing rules.
func TestAccRollout_fluxPreexistingNamespace(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxns")
	ctx := context.Background()
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	repository := f.Flux.RegistryURL("gradual/" + name)
	config := rolloutConfig(f, name, allThree, fluxBundle(name, "ours", false), fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, repository))
	theirs := client.ObjectKey{Namespace: name, Name: "other-team"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, c := range clusters {
				wc := workloadClient(t, f, c)
				var ns corev1.Namespace
				if err := wc.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil || ns.DeletionTimestamp != nil {
					return fmt.Errorf("%s: the Namespace that existed before the rollout after destroy: %v (deleting: %v), want it kept", c, err, ns.DeletionTimestamp)
				}
				if err := wc.Get(ctx, theirs, &corev1.ConfigMap{}); err != nil {
					return fmt.Errorf("%s: the other team's ConfigMap after destroy: %v, want it kept", c, err)
				}
				if err := wc.Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s: the rollout's ConfigMap after destroy: %v, want it pruned by Flux", c, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{{
			PreConfig: func() {
				for _, c := range clusters {
					wc := workloadClient(t, f, c)
					if err := wc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
						t.Fatalf("%s: %v", c, err)
					}
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: theirs.Name}, Data: map[string]string{"owner": "another team"}}
					if err := wc.Create(ctx, cm); err != nil {
						t.Fatalf("%s: %v", c, err)
					}
				}
			},
			Config: config,
			Check: func(*terraform.State) error {
				for _, c := range clusters {
					var cm corev1.ConfigMap
					if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &cm); err != nil || cm.Data["value"] != "ours" {
						return fmt.Errorf("%s: the rollout's ConfigMap: %v %v", c, err, cm.Data)
					}
					var ns corev1.Namespace
					if err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
						return err
					}
					if ns.Annotations[fluxdelivery.PruneDisabled] != "disabled" {
						return fmt.Errorf("%s: Namespace annotations %v, want Flux's prune opt-out", c, ns.Annotations)
					}
				}
				return nil
			},
		}},
	})
}

// TestAccRollout_fluxRepositoryChange: moving `delivery.flux.repository` (same bundle) is an
// update, never a replacement: each cluster is re-pinned, wave by wave, to the same content at the
// new repository, and a watcher polling every cluster throughout the apply never finds the app
// missing (a replacement deleted every Kustomization, and Flux pruned the app fleet-wide). The
// clusters run one artifact (no values), so their Kustomizations name one OCIRepository, the
// rollout's only one in the namespace: the move's new revision leaves the old one swept.
func TestAccRollout_fluxRepositoryChange(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxrepo")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	bundle := fluxBundle(name, "same", false)
	configAt := func(repository string) string {
		return rolloutConfig(f, name, allThree, bundle, fmt.Sprintf(`canary = ["staging-eu-1"]
  delivery = { flux = { repository = %q, insecure = true } }`, repository))
	}
	first, moved := f.Flux.RegistryURL("gradual/"+name), f.Flux.RegistryURL("gradual/moved/"+name)
	var (
		watchStop = make(chan struct{})
		watchDone sync.WaitGroup
		mu        sync.Mutex
		missing   []string
		polls     int
		stopOnce  sync.Once
	)
	stop := func() { stopOnce.Do(func() { close(watchStop) }); watchDone.Wait() }
	t.Cleanup(stop)
	watch := func() {
		watchDone.Add(1)
		go func() {
			defer watchDone.Done()
			for {
				for _, c := range clusters {
					err := workloadClient(t, f, c).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{})
					mu.Lock()
					polls++
					if apierrors.IsNotFound(err) {
						missing = append(missing, c+" at "+time.Now().Format(time.TimeOnly))
					}
					mu.Unlock()
				}
				select {
				case <-watchStop:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	// pinnedTo checks that every cluster's Kustomization names an OCIRepository at repository,
	// and, as the clusters of the namespace run one artifact (no values), the same one: the
	// rollout's only OCIRepository there. A move to a new revision (here the repository's)
	// leaves none behind of the revision no cluster runs any more.
	pinnedTo := func(repository string) func(*terraform.State) error {
		return func(*terraform.State) error {
			shared := ""
			for _, c := range clusters {
				src, err := acctest.FluxSource(ctx, mc, f.Namespace, key, c)
				if err != nil {
					return err
				}
				if url, _, _ := unstructured.NestedString(src.Object, "spec", "url"); url != repository {
					return fmt.Errorf("%s: OCIRepository url %q, want %q", c, url, repository)
				}
				if shared == "" {
					shared = src.GetName()
				}
				if src.GetName() != shared {
					return fmt.Errorf("%s: its Kustomization names OCIRepository %s, %s's names %s: want one shared", c, src.GetName(), clusters[0], shared)
				}
			}
			names, err := acctest.FluxSources(ctx, mc, f.Namespace, key)
			if err != nil {
				return err
			}
			if len(names) != 1 || names[0] != shared {
				return fmt.Errorf("the rollout's OCIRepositories in %s: %v, want only the shared %s", f.Namespace, names, shared)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: configAt(first), Check: pinnedTo(first)},
			{
				PreConfig: watch,
				Config:    configAt(moved),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(pinnedTo(moved), func(*terraform.State) error {
					stop()
					mu.Lock()
					defer mu.Unlock()
					if polls == 0 {
						return fmt.Errorf("the watcher never polled")
					}
					if len(missing) > 0 {
						return fmt.Errorf("the app was missing %d times of %d polls while the repository moved: %v", len(missing), polls, missing)
					}
					return nil
				}),
			},
			{
				// The registry that is no longer used is no longer needed: a plan reads none.
				Config:   configAt(moved),
				PlanOnly: true,
			},
		},
	})
}

// TestAccRollout_fluxClusterRecreated: a Cluster the rollout delivered to through Flux is deleted;
// the next plan lists it leaving and its apply removes its Kustomization and the OCIRepository
// no other Kustomization names (the rollout has no other cluster: none is left). A
// Cluster re-created under the same name then gets nothing until a plan lists it and an apply
// delivers (before, the Kustomization left behind delivered the old revision to it at once, with
// no plan and no wave).
func TestAccRollout_fluxClusterRecreated(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxgone")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	cluster := name + "-c"
	spec := testbed.WorkloadSpec{Name: cluster, Ready: true, Labels: map[string]string{"run": name}}
	add := func() {
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := f.AddWorkload(actx, spec); err != nil {
			t.Fatalf("add %s: %v", cluster, err)
		}
	}
	remove := func() {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := f.RemoveWorkload(rctx, cluster); err != nil {
			t.Fatalf("remove %s: %v", cluster, err)
		}
	}
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = f.RemoveWorkload(rctx, cluster)
	})
	config := rolloutConfig(f, name, fmt.Sprintf(`selector = { match_labels = { run = %q } }`, name), fluxBundle(name, "one", false),
		fmt.Sprintf(`delivery = { flux = { repository = %q, insecure = true } }`, f.Flux.RegistryURL("gradual/"+name)))
	// fluxObjects counts the cluster's Kustomization and the rollout's OCIRepositories (shared by
	// the clusters of the namespace, named by none: the cluster is the rollout's only one, so
	// once its Kustomization is gone none may be left).
	fluxObjects := func() (int, error) {
		n := 0
		err := mc.Get(ctx, client.ObjectKeyFromObject(kustomization(f, key, cluster)), kustomization(f, key, cluster))
		switch {
		case err == nil:
			n++
		case !apierrors.IsNotFound(err):
			return 0, err
		}
		sources, err := acctest.FluxSources(ctx, mc, f.Namespace, key)
		return n + len(sources), err
	}
	appOn := func() error {
		return workloadClient(t, f, cluster).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{PreConfig: add, Config: config, Check: func(*terraform.State) error { return appOn() }},
			{
				// Deleted: the plan lists it leaving, the apply removes its Flux objects.
				PreConfig: remove,
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("gradual_rollout.test", tfjsonpath.New("leaving"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(cluster)})),
				}},
				Check: func(*terraform.State) error {
					if n, err := fluxObjects(); err != nil || n != 0 {
						return fmt.Errorf("%d Flux objects of the deleted cluster after the apply (%v), want none", n, err)
					}
					return nil
				},
			},
			{
				// Re-created under the name: nothing delivers to it outside a plan. Flux's interval
				// and a pin left behind would have applied within seconds; wait well past that.
				PreConfig: func() {
					add()
					time.Sleep(20 * time.Second)
					if err := appOn(); !apierrors.IsNotFound(err) {
						t.Fatalf("the re-created cluster before any apply: %v, want no app (nothing delivers outside a plan)", err)
					}
				},
				Config: config,
				Check:  func(*terraform.State) error { return appOn() },
			},
		},
	})
}

// TestAccRollout_fluxKustomizationDeletedByHand: a cluster's Kustomization deleted by hand (Flux
// prunes the app's ConfigMap with it, and keeps its Namespace) is `drifted` in the next plan, whose
// apply re-creates it and completes within verify.timeout: the Namespace is not left terminating.
func TestAccRollout_fluxKustomizationDeletedByHand(t *testing.T) {
	f := acctest.FluxFleet(t)
	name := acctest.UniqueLabel("fluxks")
	ctx := context.Background()
	mc, err := f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	key := records.Key{Kind: records.KindRollout, Namespace: f.Namespace, Name: name}
	config := rolloutConfig(f, name, allThree, fluxBundle(name, "one", false), fluxEngine.withDelivery(f, name, `canary = ["staging-eu-1"]`))
	appOn := func(cluster string) error {
		return workloadClient(t, f, cluster).Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					ks := kustomization(f, key, "prod-eu-1")
					if err := mc.Delete(ctx, ks); err != nil {
						t.Fatal(err)
					}
					deadline := time.Now().Add(2 * time.Minute)
					for !apierrors.IsNotFound(mc.Get(ctx, client.ObjectKeyFromObject(ks), ks)) || !apierrors.IsNotFound(appOn("prod-eu-1")) {
						if time.Now().After(deadline) {
							t.Fatal("the Kustomization deleted by hand (and the ConfigMap Flux prunes with it) did not go")
						}
						time.Sleep(250 * time.Millisecond)
					}
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// drifted (Flux: its Kustomization is gone): the plan updates that cluster.
					plancheck.ExpectResourceAction("gradual_rollout.test", plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					for _, c := range []string{"prod-eu-1", "prod-us-1", "staging-eu-1"} {
						if err := appOn(c); err != nil {
							return fmt.Errorf("%s: the app after the apply: %w", c, err)
						}
					}
					return nil
				},
			},
		},
	})
}
