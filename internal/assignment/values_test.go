package assignment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// valuesSpec is two modules with per-cluster values: base (the zone, from a Cluster label) and
// app, which depends on it (a tier with a default, an owner without one).
func valuesSpec(t testing.TB, values *delivery.Values) Spec {
	t.Helper()
	set := func(text string) *manifest.Set {
		s, err := manifest.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := set("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: zone, namespace: demo}\ndata: {zone: \"${zone}\", cluster: \"${cluster_name}\"}\n")
	app := set("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: demo}\ndata: {tier: \"${tier:=standard}\", owner: \"${owner}\"}\n")
	mods := []Module{{Name: "base", Objects: base}, {Name: "app", Objects: app, DependsOn: []string{"base"}}}
	for i := range mods {
		rev, err := mods[i].Objects.RevisionWith(values.Settings())
		if err != nil {
			t.Fatal(err)
		}
		mods[i].Revision = rev
	}
	ordered, err := Order(mods)
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Key: records.Key{Kind: KeyKind, Namespace: "fleet", Name: "addons"}, ClusterNamespace: "fleet", RecordNamespace: "gradual-system",
		Modules: ordered, Mode: Reconcile, Policy: worldPolicy(10, 0, engine.Halt), Values: values}
}

// objectsFor is what delivery applies of ms to cluster.
func objectsFor(ms delivery.Spec, cluster string) ([]*unstructured.Unstructured, error) {
	return ms.ObjectsFor(cluster)
}

// data returns the data of the one object of set, as text.
func data(set *manifest.Set) string {
	return fmt.Sprint(set.Objects[0].Object["data"])
}

// Every module is rendered for every eligible cluster with that cluster's values; a cluster
// missing a variable fails the whole render, naming the cluster, the module and the variable;
// what delivery gets (moduleSpec, and CheckManifests' spec with the dependencies) is rendered
// for each cluster, never the template.
func TestSpecRender(t *testing.T) {
	values := &delivery.Values{FromLabels: map[string]string{"zone": "example.com/zone"}, Clusters: map[string]map[string]string{"c1": {"owner": "team-eu"}}}
	spec := valuesSpec(t, values)
	clusters := []fleet.Cluster{
		{Name: "c1", Namespace: "fleet", Labels: map[string]string{"example.com/zone": "eu-a"}},
		{Name: "c2", Namespace: "fleet", Labels: map[string]string{"example.com/zone": "us-a"}},
		{Name: "c3", Namespace: "fleet"},
		{Name: "down", Namespace: "fleet", SkipReason: "not ready"},
	}
	err := spec.Render(clusters)
	ue, ok := usererr.As(err)
	if !ok || ue.Summary != "Missing Variable" {
		t.Fatalf("render: %v, want Missing Variable", err)
	}
	for _, want := range []string{"c2: module app: variable owner not set", "c3: module app: variable owner not set", "c3: module base: variable zone not set"} {
		if !strings.Contains(ue.Detail, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, ue.Detail)
		}
	}
	if strings.Contains(ue.Detail, "c1:") || strings.Contains(ue.Detail, "down") {
		t.Errorf("the refusal names a cluster that renders, or one that is skipped:\n%s", ue.Detail)
	}

	values.Selected = []delivery.SelectedValues{{MatchLabels: map[string]string{"example.com/zone": "us-a"}, Values: map[string]string{"owner": "team-us", "tier": "premium"}}}
	if err := spec.Render(clusters[:2]); err != nil {
		t.Fatal(err)
	}
	base, _ := spec.Module("base")
	app, _ := spec.Module("app")
	for cluster, want := range map[string][2]string{
		"c1": {"map[cluster:c1 zone:eu-a]", "map[owner:team-eu tier:standard]"},
		"c2": {"map[cluster:c2 zone:us-a]", "map[owner:team-us tier:premium]"},
	} {
		for i, m := range []Module{base, app} {
			objs, err := objectsFor(spec.moduleSpec(m), cluster)
			if err != nil {
				t.Fatal(err)
			}
			if got := data(&manifest.Set{Objects: objs}); got != want[i] {
				t.Errorf("module %s on %s gets %s, want %s", m.Name, cluster, got, want[i])
			}
		}
		// The check of app on a cluster holds base too, both rendered for that cluster.
		checked, err := objectsFor(spec.checkedSpec(app, []string{cluster}), cluster)
		if err != nil || len(checked) != 2 || data(&manifest.Set{Objects: checked[:1]}) != want[0] || data(&manifest.Set{Objects: checked[1:]}) != want[1] {
			t.Errorf("app's check on %s: %v (%v), want base's then app's rendering", cluster, checked, err)
		}
	}
	if _, err := objectsFor(spec.moduleSpec(app), "c3"); err == nil {
		t.Error("a cluster that was not rendered gets the template")
	}
	if _, err := objectsFor(spec.checkedSpec(app, []string{"c3"}), "c3"); err == nil {
		t.Error("a cluster that was not rendered is checked with the template")
	}

	// Without values nothing is rendered: every cluster gets the bundle as given.
	plain := valuesSpec(t, nil)
	plain.Values = nil
	if err := plain.Render(clusters); err != nil {
		t.Fatal(err)
	}
	if m, _ := plain.Module("app"); m.Rendered != nil {
		t.Errorf("rendered without values: %v", m.Rendered)
	}
}

// One assignment, per-cluster values, over the fake fleet: each cluster gets (and its records
// keep) its own rendering of every module; a label change on one cluster makes the refresh find
// it alone values-changed, shown in attention, and the plan from that state updates it alone; a
// cluster missing a variable refuses the run before anything is applied anywhere.
func TestRunValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		values := &delivery.Values{FromLabels: map[string]string{"zone": "example.com/zone"}, Clusters: map[string]map[string]string{
			"c1": {"owner": "team-1"}, "c2": {"owner": "team-2"}, "c3": {"owner": "team-3"}}}
		f := newFakeFleet(t, valuesSpec(t, values))
		for name, zone := range map[string]string{"c1": "eu-a", "c2": "us-a"} {
			f.add(name).labels = map[string]string{"example.com/zone": zone}
		}
		a := f.apply(f.plan())
		if a.err != nil {
			t.Fatal(a.err)
		}
		rendered := func(cluster, module string) string { return f.clusters[cluster].mod(module).rendered }
		for _, m := range []string{"base", "app"} {
			if rendered("c1", m) == "" || rendered("c1", m) == rendered("c2", m) && m == "base" {
				t.Fatalf("module %s rendered %q on c1 and %q on c2: want each its own", m, rendered("c1", m), rendered("c2", m))
			}
		}
		before := map[string]string{"c1/base": rendered("c1", "base"), "c2/base": rendered("c2", "base"), "c2/app": rendered("c2", "app")}

		// c1 moves zone: the refresh finds it alone values-changed, for base alone (app takes no zone).
		f.clusters["c1"].labels = map[string]string{"example.com/zone": "eu-b"}
		q := fleet.Query{Namespace: f.spec.ClusterNamespace}
		obs, err := observe(ctx, f, q, f.spec, true)
		if err != nil {
			t.Fatal(err)
		}
		status := Status(obs, f.spec)
		summary, attention := Summarize(status)
		if summary[string(StateValuesChanged)] != 1 || summary[string(StateCurrent)] != 1 || len(attention) != 1 ||
			!strings.Contains(attention["c1"], "values-changed: module base renders differently for this cluster now") {
			t.Fatalf("summary %v, attention %v: want c1 alone values-changed, module base", summary, attention)
		}
		// The plan from that state (as the resource makes it) updates c1 alone, base alone.
		now, err := observe(ctx, f, q, f.spec, false)
		if err != nil {
			t.Fatal(err)
		}
		p := decide(now, PlanRequest{Spec: f.spec, Query: q, Prior: status, PriorSkipped: map[string]string{}, Drifted: Drifted(status)})
		if p.Refusing() || len(p.Plan.Apply) != 1 || !slices.Equal(p.Plan.Apply["base"], []string{"c1"}) {
			t.Fatalf("planned %v (refused %v), want base on c1 alone", p.Plan.Apply, p.Refused)
		}
		f.runs = nil
		a = f.apply(RunRequest{Spec: f.spec, Query: q, Planned: p.Plan.Apply, PlannedKnown: true, Waves: p.Waves})
		if a.err != nil {
			t.Fatal(a.err)
		}
		if len(f.runs) != 1 || f.runs[0].module != "base" || !slices.Equal(f.runs[0].only, []string{"c1"}) {
			t.Fatalf("runs %s, want base on c1 alone", f.runsOn())
		}
		if rendered("c1", "base") == before["c1/base"] || rendered("c2", "base") != before["c2/base"] || rendered("c2", "app") != before["c2/app"] {
			t.Fatalf("after the update c1/base %s (was %s), c2 %s/%s (was %s/%s): want c1's base alone rendered anew",
				rendered("c1", "base"), before["c1/base"], rendered("c2", "base"), rendered("c2", "app"), before["c2/base"], before["c2/app"])
		}
		if obs, err = observe(ctx, f, q, f.spec, true); err != nil {
			t.Fatal(err)
		}
		if summary, attention := Summarize(Status(obs, f.spec)); summary[string(StateCurrent)] != 2 || len(attention) != 0 {
			t.Fatalf("after the update: summary %v, attention %v", summary, attention)
		}

		// c3 joins without the zone label: the run refuses before anything is applied anywhere,
		// though c1 would have a change too.
		f.add("c3")
		f.clusters["c1"].labels = map[string]string{"example.com/zone": "eu-c"}
		f.runs = nil
		bound := f.bindings()
		a = f.applyUnchecked(RunRequest{})
		ue, ok := usererr.As(a.err)
		if !ok || ue.Summary != "Missing Variable" || !strings.Contains(ue.Detail, "c3: module base: variable zone not set") {
			t.Fatalf("run: %v, want Missing Variable naming c3, module base and zone", a.err)
		}
		if len(f.runs) != 0 || len(a.after) != len(bound) || f.clusters["c3"].mods["base"] != nil {
			t.Fatalf("a refused run delivered %s; bindings %v (before %v)", f.runsOn(), a.after, bound)
		}
	})
}

// verify.check_job is rendered as the modules are: each cluster's Job with its variables; a
// cluster missing a variable the Job uses refuses the plan naming the cluster and the variable.
func TestSpecRenderCheckJob(t *testing.T) {
	values := &delivery.Values{FromLabels: map[string]string{"zone": "example.com/zone"}, Clusters: map[string]map[string]string{
		"c1": {"owner": "team-eu"}, "c2": {"owner": "team-us"}}}
	spec := valuesSpec(t, values)
	job, err := delivery.ParseCheckJob("apiVersion: batch/v1\nkind: Job\nmetadata: {name: smoke, namespace: demo}\n" +
		"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: smoke, image: \"registry.example/smoke:${probe_tag}\"}]\n")
	if err != nil {
		t.Fatal(err)
	}
	spec.CheckJob = &delivery.CheckJob{Job: job}
	given := spec.CheckJob
	clusters := []fleet.Cluster{
		{Name: "c1", Namespace: "fleet", Labels: map[string]string{"example.com/zone": "eu-a"}},
		{Name: "c2", Namespace: "fleet", Labels: map[string]string{"example.com/zone": "us-a"}},
	}
	err = spec.Render(clusters)
	ue, ok := usererr.As(err)
	if !ok || ue.Summary != "Missing Variable" || !strings.Contains(ue.Detail, "c1: verify.check_job: variable probe_tag not set") ||
		!strings.Contains(ue.Detail, "c2: verify.check_job: variable probe_tag not set") {
		t.Fatalf("render: %v, want Missing Variable naming c1, c2 and probe_tag in verify.check_job", err)
	}
	values.Clusters["c1"]["probe_tag"], values.Clusters["c2"]["probe_tag"] = "eu", "us"
	if err := spec.Render(clusters); err != nil {
		t.Fatal(err)
	}
	if given.Rendered != nil {
		t.Error("Render changed the caller's check Job")
	}
	for cluster, want := range map[string]string{"c1": "registry.example/smoke:eu", "c2": "registry.example/smoke:us"} {
		obj, err := spec.CheckJob.For(cluster, true)
		if err != nil {
			t.Fatal(err)
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if got := containers[0].(map[string]any)["image"]; got != want {
			t.Errorf("%s runs image %v, want %s", cluster, got, want)
		}
	}
	if _, err := spec.CheckJob.For("c3", true); err == nil {
		t.Error("a cluster the Job was not rendered for runs the template")
	}
}
