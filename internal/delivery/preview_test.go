package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
)

// TestPreviewTargets: which planned clusters each mode dry-runs, with no cluster's answer.
func TestPreviewTargets(t *testing.T) {
	canaryPlan := engine.Plan{Waves: [][]string{{"k1"}, {"k2"}, {"a", "b"}, {"c"}}, CanaryWaves: 2}
	plain := engine.Plan{Waves: [][]string{{"a", "b"}, {"c"}}}
	cases := []struct {
		name     string
		mode     string
		plan     engine.Plan
		changing []string
		want     []string
	}{
		{"none dry-runs nothing", PreviewNone, plain, []string{"a", "b", "c"}, nil},
		{"all: every changing cluster", PreviewAll, plain, []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"canary: the canary waves", PreviewCanary, canaryPlan, []string{"k1", "k2", "a", "b", "c"}, []string{"k1", "k2"}},
		{"canary unset: the first wave", PreviewCanary, plain, []string{"a", "b", "c"}, []string{"a", "b"}},
		{"the default is canary", "", plain, []string{"a", "b", "c"}, []string{"a", "b"}},
		{"a planned cluster the fleet no longer offers is not asked", PreviewCanary, plain, []string{"b", "c"}, []string{"b"}},
		{"nothing planned", PreviewCanary, engine.Plan{}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			if mode == "" {
				mode = PreviewSpec{}.mode()
			}
			if got := PreviewTargets(mode, tc.plan, tc.changing); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreviewReport: what a plan says of a preview, refusals and text, sized for any fleet.
func TestPreviewReport(t *testing.T) {
	ok := ClusterPreview{Counts: apply.PreviewCounts{Created: 1, Changed: 2, Unchanged: 3}}
	rejected := ClusterPreview{Counts: apply.PreviewCounts{Rejected: 1, Unchanged: 2}, Rejected: []apply.Rejection{
		{Object: apply.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"},
			Reason: `ValidatingAdmissionPolicy 'no-latest' denied request: image tag latest`}}}
	conflict := ClusterPreview{Counts: apply.PreviewCounts{Conflicting: 1, Unchanged: 2}, Conflicts: []string{"ConfigMap demo/cfg: conflict with helm"}}
	slow := ClusterPreview{NotPreviewed: "the preview's time budget ran out"}
	many := func(n int, c ClusterPreview, prefix string) map[string]ClusterPreview {
		out := map[string]ClusterPreview{}
		for i := range n {
			out[fmt.Sprintf("%s%04d", prefix, i)] = c
		}
		return out
	}
	merge := func(ms ...map[string]ClusterPreview) map[string]ClusterPreview {
		out := map[string]ClusterPreview{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	cases := []struct {
		name      string
		clusters  map[string]ClusterPreview
		skipped   string
		refusal   []string // substrings of the refusal; nil for none
		text      []string // substrings of the text
		notText   []string
		maxLines  int
		attention bool
	}{
		{name: "few clusters: one line each", clusters: map[string]ClusterPreview{"w1": ok, "w2": ok},
			text: []string{"2 of 2 clusters previewed", "w1: 1 created, 2 changed, 3 unchanged, 0 conflicting"}, maxLines: 3},
		{name: "a rejection fails the plan naming cluster, object and reason", clusters: map[string]ClusterPreview{"w1": ok, "w2": rejected},
			refusal: []string{"w2: Deployment demo/web", "denied request: image tag latest"}},
		{name: "a slow cluster is listed as not previewed, never passed", clusters: map[string]ClusterPreview{"w1": ok, "w2": slow},
			text: []string{"1 of 2 clusters previewed", "Not previewed, 1 clusters", "w2 — the preview's time budget ran out"}, attention: true},
		{name: "conflicts are named with the first one's detail", clusters: map[string]ClusterPreview{"w1": conflict},
			text: []string{"Conflicting fields on 1 clusters", "w1: ConfigMap demo/cfg: conflict with helm"}, attention: true},
		{name: "1,000 clusters: counts, and at most ten names per line",
			clusters: merge(many(990, ok, "ok"), many(6, conflict, "cf"), many(4, slow, "slow")),
			text: []string{"996 of 1000 clusters previewed", "objects in all: 990 created, 1980 changed, 2982 unchanged, 6 conflicting",
				"Not previewed, 4 clusters"},
			notText: []string{"ok0001"}, maxLines: 6, attention: true},
		{name: "1,000 rejections: the refusal stays short", clusters: many(1000, rejected, "w"),
			refusal: []string{"w0000: Deployment demo/web", "… and 980 more"}},
		{name: "Flux: said why nothing was dry-run", skipped: "delivery through Flux", text: []string{"No cluster was dry-run: delivery through Flux"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &Preview{Mode: PreviewCanary, Budget: DefaultPreviewBudget, Clusters: tc.clusters, Skipped: tc.skipped}
			err := p.Refusal()
			if (err != nil) != (tc.refusal != nil) {
				t.Fatalf("refusal %v, want one containing %q", err, tc.refusal)
			}
			if err != nil {
				for _, s := range tc.refusal {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal lacks %q:\n%v", s, err)
					}
				}
				if n := strings.Count(err.Error(), "\n"); n > 25 {
					t.Errorf("refusal has %d lines", n)
				}
				return
			}
			text := p.Text()
			for _, s := range tc.text {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tc.notText {
				if strings.Contains(text, s) {
					t.Errorf("text has %q:\n%s", s, text)
				}
			}
			if n := strings.Count(text, "\n") + 1; tc.maxLines > 0 && n > tc.maxLines {
				t.Errorf("%d lines, want at most %d:\n%s", n, tc.maxLines, text)
			}
			if p.NeedsAttention() != tc.attention {
				t.Errorf("needs attention %v, want %v", p.NeedsAttention(), tc.attention)
			}
		})
	}
}

// TestServicePlanPreview: the plan's one check per changing cluster dry-runs the revision on
// the clusters preview picks, against fake clusters that reject, conflict, fail or are too
// slow for the budget; a rejection refuses the plan before anything is written.
func TestServicePlanPreview(t *testing.T) {
	cases := []struct {
		name    string
		mode    string
		c2      faults
		refused string
		check   func(t *testing.T, p *Preview)
	}{
		{name: "canary (the first wave) only", mode: PreviewCanary, check: func(t *testing.T, p *Preview) {
			if len(p.Clusters) != 1 || p.Clusters["c1"].Counts != (apply.PreviewCounts{Created: 1, Changed: 2}) {
				t.Fatalf("clusters %+v: want c1 alone, 1 created, 2 changed", p.Clusters)
			}
		}},
		{name: "none: no dry-run", mode: PreviewNone, check: func(t *testing.T, p *Preview) {
			if p != nil {
				t.Fatalf("preview %+v with none", p)
			}
		}},
		{name: "all: an admission rejection on c2 refuses the plan", mode: PreviewAll,
			c2: faults{previewRejects: "denied by ValidatingAdmissionPolicy 'no-web'"}, refused: "manifests: Manifests Rejected By The API Server"},
		{name: "all: c2 too slow for the budget is not previewed, c1 is", mode: PreviewAll, c2: faults{previewSlow: true},
			check: func(t *testing.T, p *Preview) {
				if p.Clusters["c2"].NotPreviewed != "the preview's time budget ran out" || p.Clusters["c1"].NotPreviewed != "" {
					t.Fatalf("clusters %+v", p.Clusters)
				}
			}},
		{name: "all: c2's API failing is not previewed, with why", mode: PreviewAll, c2: faults{previewDown: true},
			check: func(t *testing.T, p *Preview) {
				if !strings.Contains(p.Clusters["c2"].NotPreviewed, "request timed out") || !p.NeedsAttention() {
					t.Fatalf("clusters %+v", p.Clusters)
				}
			}},
		{name: "all: a conflict is counted, not refused", mode: PreviewAll, c2: faults{previewConflict: true},
			check: func(t *testing.T, p *Preview) {
				if p.Clusters["c2"].Counts.Conflicting != 1 || !strings.Contains(p.Text(), `owned by field manager "helm"`) {
					t.Fatalf("clusters %+v\n%s", p.Clusters, p.Text())
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{}}, {"c2", startOld, tc.c2}})
				e.spec.Preview = PreviewSpec{Mode: tc.mode}
				start := time.Now()
				res, err := e.svc.Plan(ctx, PlanRequest{Spec: e.spec, Query: fleet.Query{Namespace: "fleet"}})
				if err != nil {
					t.Fatal(err)
				}
				if elapsed := time.Since(start); elapsed > DefaultPreviewBudget+time.Second {
					t.Errorf("the plan took %s, past the budget", elapsed)
				}
				if got := refusalTitle(res.Refused); got != tc.refused {
					t.Fatalf("refused %q, want %q", got, tc.refused)
				}
				if tc.refused != "" {
					msg := res.Refused.Err.Error()
					if !strings.Contains(msg, "c2: Deployment demo/web: denied by ValidatingAdmissionPolicy 'no-web'") {
						t.Errorf("refusal does not name the cluster, object and reason:\n%s", msg)
					}
					for _, name := range e.names {
						if c := e.clusters[name]; len(c.created) > 0 || c.desiredApply > 0 {
							t.Errorf("%s: written at plan: created %v, applies %d", name, c.created, c.desiredApply)
						}
					}
					return
				}
				tc.check(t, res.Preview)
			})
		})
	}
}

// The previews of several bundles of one plan (an assignment's modules): one refusal naming,
// per rejection, the cluster, the bundle (Label), the object and the server's reason.
func TestPreviewsRefusal(t *testing.T) {
	rejected := func(obj, reason string) ClusterPreview {
		return ClusterPreview{Rejected: []apply.Rejection{{Object: apply.ObjectRef{Kind: "Deployment", Namespace: "demo", Name: obj}, Reason: reason}}}
	}
	cni := &Preview{Label: "module cni", Clusters: map[string]ClusterPreview{"c1": {}, "c2": rejected("cni", "denied by ValidatingAdmissionPolicy 'no-cni'")}}
	dns := &Preview{Label: "module dns", Clusters: map[string]ClusterPreview{"c1": rejected("dns", "spec.replicas: Invalid value")}}
	if err := PreviewsRefusal(nil, &Preview{Label: "module ok", Clusters: map[string]ClusterPreview{"c1": {}}}); err != nil {
		t.Fatalf("no rejection: %v", err)
	}
	// app's dry-run holds cni's objects too (it depends on it): cni's rejection is named once.
	app := &Preview{Label: "module app", Clusters: map[string]ClusterPreview{"c2": rejected("cni", "denied by ValidatingAdmissionPolicy 'no-cni'")}}
	err := PreviewsRefusal(cni, nil, dns, app)
	if err == nil {
		t.Fatal("rejections in two modules: no refusal")
	}
	for _, want := range []string{"c2: module cni: Deployment demo/cni: denied by ValidatingAdmissionPolicy 'no-cni'", "c1: module dns: Deployment demo/dns: spec.replicas: Invalid value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not say %q:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), "module app") {
		t.Errorf("an object of two modules' dry-runs is named twice:\n%s", err)
	}
}

// Shared: a plan dry-running several bundles one after the other gives all of them one budget,
// counted from the start: once it has run out, the next bundle's clusters are not previewed
// (and not counted as passing), while the check of every cluster still runs.
func TestPreviewSharedBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := newEnv(t, testPolicy(t, "1", "0", engine.Rollback), []clusterSpec{{"c1", startOld, faults{previewSlow: true}}, {"c2", startOld, faults{}}})
		e.spec.Preview = PreviewSpec{Mode: PreviewAll}.Shared(time.Now())
		start := time.Now()
		first, err := e.svc.CheckAndPreview(ctx, e.spec, []string{"c1"}, []string{"c1"})
		if err != nil {
			t.Fatal(err)
		}
		second, err := e.svc.CheckAndPreview(ctx, e.spec, []string{"c2"}, []string{"c2"})
		if err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed > DefaultPreviewBudget+time.Second {
			t.Errorf("the two dry-runs took %s, past the one budget", elapsed)
		}
		for name, p := range map[string]*Preview{"c1": first, "c2": second} {
			if got := p.Clusters[name].NotPreviewed; got != "the preview's time budget ran out" {
				t.Errorf("%s: not previewed %q, want the budget ran out", name, got)
			}
		}
	})
}
