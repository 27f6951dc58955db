package delivery

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// TestValuesFor: where a cluster's variables come from, and which source wins.
func TestValuesFor(t *testing.T) {
	cluster := fleet.Cluster{
		Name: "eu-1", Namespace: "fleet",
		Labels:            map[string]string{"region": "eu-west", "tier": "gold"},
		Annotations:       map[string]string{"example.com/cidr": "10.1.0.0/16"},
		TopologyVariables: map[string]string{"imageRepository": `"registry.eu"`, "replicas": `3`, "region": `"from-topology"`, "bad-name": `"x"`},
	}
	cases := []struct {
		name   string
		values Values
		want   map[string]string
	}{
		{name: "the Cluster's own and its topology variables",
			want: map[string]string{"cluster_name": "eu-1", "cluster_namespace": "fleet", "imageRepository": "registry.eu", "replicas": "3", "region": "from-topology"}},
		{name: "labels over topology variables, annotations over labels",
			values: Values{FromLabels: map[string]string{"region": "region", "missing": "no-such-label"}, FromAnnotations: map[string]string{"cidr": "example.com/cidr", "region": "example.com/cidr"}},
			want: map[string]string{"cluster_name": "eu-1", "cluster_namespace": "fleet", "imageRepository": "registry.eu", "replicas": "3",
				"region": "10.1.0.0/16", "cidr": "10.1.0.0/16"}},
		{name: "selected entries that match, in order, then the cluster's own map",
			values: Values{FromLabels: map[string]string{"region": "region"}, Selected: []SelectedValues{
				{MatchLabels: map[string]string{"tier": "gold"}, Values: map[string]string{"size": "large", "zone": "a"}},
				{MatchLabels: map[string]string{"tier": "silver"}, Values: map[string]string{"size": "small"}},
				{MatchLabels: map[string]string{"region": "eu-west"}, Values: map[string]string{"zone": "b"}},
			}, Clusters: map[string]map[string]string{"eu-1": {"zone": "c"}, "us-1": {"zone": "d"}}},
			want: map[string]string{"cluster_name": "eu-1", "cluster_namespace": "fleet", "imageRepository": "registry.eu", "replicas": "3",
				"region": "eu-west", "size": "large", "zone": "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.values.For(cluster); !maps.Equal(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestValuesValidate(t *testing.T) {
	for _, tc := range []struct {
		values Values
		want   string
	}{
		{Values{FromLabels: map[string]string{"region": "r"}}, ""},
		{Values{FromLabels: map[string]string{"cluster_name": "r"}}, `from_labels: "cluster_name" is set from the Cluster itself`},
		{Values{Clusters: map[string]map[string]string{"a": {"my-var": "x"}}}, `clusters["a"]: "my-var" is not a variable name`},
		{Values{Selected: []SelectedValues{{Values: map[string]string{"1x": "x"}}}}, `selected[0].values: "1x" is not a variable name`},
	} {
		err := tc.values.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.values, err, tc.want)
		}
	}
	if (&Values{}).Settings() == nil || (*Values)(nil).Settings() != nil {
		t.Fatal("settings: values must count in the revision, no values must not")
	}
}

const valuesTemplate = `apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: demo}
data: {region: "${region}", cluster: "${cluster_name}", color: "${color:=blue}"}
`

// TestValuesRollout: one bundle rendered per cluster, each record holding its own rendering; a
// label change on one cluster makes the refresh find that cluster alone values-changed and the
// plan update it alone; a cluster missing a variable refuses plan and apply, naming it.
func TestValuesRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newEnv(t, testPolicy(t, "100%", "0", engine.Rollback), []clusterSpec{{"c1", startFresh, faults{}}, {"c2", startFresh, faults{}}, {"c3", startFresh, faults{}}})
		e.labels = map[string]map[string]string{"c1": {"region": "eu"}, "c2": {"region": "us"}, "c3": {"region": "ap"}}
		template, err := manifest.Parse(valuesTemplate)
		if err != nil {
			t.Fatal(err)
		}
		e.spec.Values = &Values{FromLabels: map[string]string{"region": "region"}}
		e.spec.Objects = template
		if e.spec.Revision, err = template.RevisionWith(e.spec.Values.Settings()); err != nil {
			t.Fatal(err)
		}
		query := fleet.Query{Namespace: "fleet"}
		if _, err := e.svc.Run(ctx, RunRequest{Spec: e.spec, Query: query}); err != nil {
			t.Fatal(err)
		}
		for name, region := range map[string]string{"c1": "eu", "c2": "us", "c3": "ap"} {
			live := e.clusters[name].describeLive()
			if !strings.Contains(live, `"region":"`+region+`"`) || !strings.Contains(live, `"cluster":"`+name+`"`) || !strings.Contains(live, `"color":"blue"`) {
				t.Fatalf("%s holds %s: want region %s, its own name and the default color", name, live, region)
			}
		}
		// Each cluster's record holds what was rendered for it: one revision, three digests.
		digests := map[string]bool{}
		for _, name := range []string{"c1", "c2", "c3"} {
			state, err := records.NewWorkloadStore(e.clusters[name].base, e.spec.RecordNamespace).LoadCurrent(ctx, e.spec.Key)
			if err != nil || state.Current == nil || state.Current.Revision != e.spec.Revision {
				t.Fatalf("%s: current record %+v (%v), want revision %s", name, state, err, e.spec.Revision)
			}
			want, err := manifest.Substitute(template, e.spec.Values.For(fleet.Cluster{Name: name, Namespace: "fleet", Labels: e.labels[name]}))
			if err != nil {
				t.Fatal(err)
			}
			wantCanonical, _ := want.Canonical()
			if got := manifest.Digest(state.Current.Manifests); got != manifest.Digest(wantCanonical) {
				t.Fatalf("%s: the record holds rendering %s, want %s (its own)", name, got, manifest.Digest(wantCanonical))
			}
			digests[manifest.Digest(state.Current.Manifests)] = true
		}
		if len(digests) != 3 {
			t.Fatalf("the three records hold %d distinct renderings, want 3", len(digests))
		}
		rendering := Rendering{Revision: e.spec.Revision, Template: template, Values: e.spec.Values}
		obs, err := e.svc.ObserveRendered(ctx, query, e.spec.Key, e.spec.RecordNamespace, rendering)
		if err != nil {
			t.Fatal(err)
		}
		for name, st := range obs.Clusters {
			if st.State != StateCurrent || st.Revision != e.spec.Revision {
				t.Fatalf("%s: %+v, want current on %s", name, st, e.spec.Revision)
			}
		}

		e.labels["c2"] = map[string]string{"region": "us-east"}
		obs, err = e.svc.ObserveRendered(ctx, query, e.spec.Key, e.spec.RecordNamespace, rendering)
		if err != nil {
			t.Fatal(err)
		}
		var changed []string
		for name, st := range obs.Clusters {
			if st.State == StateValuesChanged {
				changed = append(changed, name)
			}
		}
		if !slices.Equal(changed, []string{"c2"}) || !slices.Equal(obs.Clusters["c2"].Drift, []string{"/ConfigMap demo/web-config"}) {
			t.Fatalf("values-changed %v (c2: %+v), want c2 alone, naming its ConfigMap", changed, obs.Clusters["c2"])
		}
		// The plan from that refresh (the prior state) updates c2 alone, and so does apply.
		prior := &Prior{Clusters: obs.Clusters, Skipped: obs.Skipped}
		res, err := e.svc.Plan(ctx, PlanRequest{Spec: e.spec, Query: query, Prior: prior})
		if err != nil || res.Refused != nil {
			t.Fatalf("plan: %v %v", err, res.Refused)
		}
		if !slices.EqualFunc(res.Plan.Waves, [][]string{{"c2"}}, slices.Equal) {
			t.Fatalf("waves %v, want c2 alone", res.Plan.Waves)
		}
		if _, err := e.svc.Run(ctx, RunRequest{Spec: e.spec, Query: query, Planned: res.Plan.Waves, PlannedKnown: true}); err != nil {
			t.Fatal(err)
		}
		if live := e.clusters["c2"].describeLive(); !strings.Contains(live, `"region":"us-east"`) {
			t.Fatalf("c2 holds %s after the update", live)
		}
		obs, err = e.svc.ObserveRendered(ctx, query, e.spec.Key, e.spec.RecordNamespace, rendering)
		if err != nil || obs.Clusters["c2"].State != StateCurrent {
			t.Fatalf("after the update: %v %+v", err, obs.Clusters["c2"])
		}

		// c3 loses its label: nothing can be rendered for it, and nothing is applied anywhere.
		e.labels["c3"] = nil
		e.labels["c1"] = map[string]string{"region": "eu-2"}
		before := e.clusters["c1"].describeLive()
		res, err = e.svc.Plan(ctx, PlanRequest{Spec: e.spec, Query: query})
		if err != nil {
			t.Fatal(err)
		}
		ue, ok := usererr.As(res.Refused.Err)
		if !ok || ue.Summary != "Missing Variable" || !strings.Contains(ue.Detail, "c3: variable region not set") {
			t.Fatalf("plan refused %v, want Missing Variable naming c3 and region", res.Refused)
		}
		if _, err := e.svc.Run(ctx, RunRequest{Spec: e.spec, Query: query}); err == nil || !strings.Contains(err.Error(), "c3: variable region") {
			t.Fatalf("apply: %v, want the same refusal", err)
		}
		if after := e.clusters["c1"].describeLive(); after != before {
			t.Fatalf("c1 changed although the run was refused:\n%s\n%s", before, after)
		}
	})
}

// TestValuesRender: what each eligible cluster renders and why the others cannot be, the
// reasons free of the sensitive values; a skipped cluster is neither.
func TestValuesRender(t *testing.T) {
	template, err := manifest.Parse(valuesTemplate + `---
apiVersion: v1
kind: ConfigMap
metadata: {name: token, namespace: demo}
data: {token: "${region} s3cr3t-t0ken ${x"}
`)
	if err != nil {
		t.Fatal(err)
	}
	v := &Values{FromLabels: map[string]string{"region": "region"}}
	clusters := []fleet.Cluster{
		{Name: "eu", Namespace: "fleet", Labels: map[string]string{"region": "eu"}},
		{Name: "bare", Namespace: "fleet"},
		{Name: "down", Namespace: "fleet", SkipReason: "not ready"},
	}
	rendered, problems := v.Render(template, clusters, []string{"s3cr3t-t0ken"})
	if len(rendered) != 0 || !slices.Equal(slices.Sorted(maps.Keys(problems)), []string{"bare", "eu"}) {
		t.Fatalf("rendered %v, problems %v: want the malformed template refused on both eligible clusters", rendered, problems)
	}
	if strings.Contains(problems["eu"], "s3cr3t-t0ken") {
		t.Errorf("the reason repeats a sensitive value: %s", problems["eu"])
	}
	template, err = manifest.Parse(valuesTemplate)
	if err != nil {
		t.Fatal(err)
	}
	rendered, problems = v.Render(template, clusters, nil)
	if !slices.Equal(slices.Sorted(maps.Keys(rendered)), []string{"eu"}) || !slices.Equal(slices.Sorted(maps.Keys(problems)), []string{"bare"}) ||
		!strings.Contains(problems["bare"], "variable region not set") {
		t.Fatalf("rendered %v, problems %v: want eu rendered, bare missing region, down neither", slices.Sorted(maps.Keys(rendered)), problems)
	}
	if got := rendered["eu"].Objects[0].Object["data"]; !strings.Contains(fmt.Sprint(got), "region:eu") {
		t.Errorf("eu rendered %v", got)
	}
}
