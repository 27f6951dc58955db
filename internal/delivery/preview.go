package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Preview modes: which planned clusters the plan dry-runs the revision on (a rollout's
// `preview`).
const (
	PreviewNone   = "none"
	PreviewCanary = "canary" // the canary waves, or the first wave when there is no canary
	PreviewAll    = "all"
)

// DefaultPreviewBudget bounds a plan's dry-runs, all clusters together: a plan waits that much
// longer at most for a slow fleet. Clusters whose dry-run has not finished by then are listed
// as not previewed (apply still checks each before its wave), never counted as passing.
const DefaultPreviewBudget = 30 * time.Second

// PreviewSpec says which clusters a plan dry-runs on and for how long.
type PreviewSpec struct {
	// Mode is PreviewNone, PreviewCanary ("" means it) or PreviewAll.
	Mode string
	// Budget bounds the dry-runs of one plan; 0 is DefaultPreviewBudget.
	Budget time.Duration
	// Until, when set, is when the dry-runs end instead of Budget from the check: a plan that
	// dry-runs several bundles (an assignment's modules) gives all of them one budget (Shared).
	Until time.Time
}

// Shared is p with its budget counted from now, for a plan that dry-runs several bundles one
// after the other within one budget.
func (p PreviewSpec) Shared(now time.Time) PreviewSpec {
	if p.Until.IsZero() {
		p.Until = now.Add(p.budget())
	}
	return p
}

// withBudget is ctx ending when p's dry-runs must end.
func (p PreviewSpec) withBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	if !p.Until.IsZero() {
		return context.WithDeadline(ctx, p.Until)
	}
	return context.WithTimeout(ctx, p.budget())
}

func (p PreviewSpec) mode() string {
	if p.Mode == "" {
		return PreviewCanary
	}
	return p.Mode
}

func (p PreviewSpec) budget() time.Duration {
	if p.Budget <= 0 {
		return DefaultPreviewBudget
	}
	return p.Budget
}

// ClusterPreview is what the dry-run found on one cluster: its counts, or why there are none.
type ClusterPreview struct {
	Counts    apply.PreviewCounts
	Rejected  []apply.Rejection
	Conflicts []string
	// NotPreviewed, when set, says why the cluster has no preview (the budget ran out, its API
	// did not answer): nothing is known of it, and nothing is claimed.
	NotPreviewed string
}

// Preview is what a plan's dry-run found, by cluster.
type Preview struct {
	// Label, when set, names the bundle in Refusal's lines ("module cni"), for a plan that
	// dry-runs several.
	Label    string
	Mode     string
	Budget   time.Duration
	Clusters map[string]ClusterPreview
	// Skipped, when set, says why no cluster was dry-run although Mode asks for it.
	Skipped string
}

// PreviewTargets picks, among the clusters a plan changes (changing, in wave order), those
// mode dry-runs: none, all, or the canary waves (the first wave when there are no canaries).
// It is pure.
func PreviewTargets(mode string, plan engine.Plan, changing []string) []string {
	var waves [][]string
	switch mode {
	case PreviewNone:
		return nil
	case PreviewAll:
		return slices.Clone(changing)
	default:
		n := min(max(plan.CanaryWaves, 1), len(plan.Waves))
		waves = plan.Waves[:n]
	}
	offered := map[string]bool{}
	for _, name := range changing {
		offered[name] = true
	}
	var out []string
	for _, wave := range waves {
		for _, name := range wave {
			if offered[name] {
				out = append(out, name)
			}
		}
	}
	return out
}

// previewOne dry-runs objs on one cluster within ctx (which carries the budget's deadline) and
// says what it found. A cluster that cannot be asked is not previewed, with the reason: the
// budget ran out, or its API failed. redactValues are kept out of the reasons.
func previewOne(ctx context.Context, a objectApplier, objs []*unstructured.Unstructured, redactValues []string) ClusterPreview {
	if err := ctx.Err(); err != nil {
		return ClusterPreview{NotPreviewed: notPreviewedReason(ctx, err)}
	}
	res, err := a.Preview(ctx, objs)
	if err != nil {
		return ClusterPreview{NotPreviewed: notPreviewedReason(ctx, redact(err, redactValues))}
	}
	out := ClusterPreview{Counts: res.Counts}
	for _, r := range res.Rejected {
		out.Rejected = append(out.Rejected, apply.Rejection{Object: r.Object, Reason: redact(errors.New(r.Reason), redactValues).Error()})
	}
	for _, c := range res.Conflicts {
		out.Conflicts = append(out.Conflicts, redact(c, redactValues).Error())
	}
	return out
}

// notPreviewedReason words why a cluster's dry-run did not finish: the budget, or err.
func notPreviewedReason(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "the preview's time budget ran out"
	}
	return err.Error()
}

// Refusal is the plan's error when a cluster rejected objects of the revision in the dry-run
// (schema, validation, admission): apply would fail on them, so nothing is applied anywhere.
// Each rejection names the cluster, the object and the server's reason. nil when none.
func (p *Preview) Refusal() error {
	return PreviewsRefusal(p)
}

// PreviewsRefusal is Refusal for the previews of several bundles of one plan (an assignment's
// modules, each with its Label): one error listing every rejection, nil when none. An object
// in several bundles (a module's dry-run holds those of the modules it depends on) is named
// once, with the first.
func PreviewsRefusal(previews ...*Preview) error {
	const most = 20
	var lines []string
	n := 0
	seen := map[string]bool{}
	for _, p := range previews {
		if p == nil {
			continue
		}
		label := ""
		if p.Label != "" {
			label = p.Label + ": "
		}
		for _, name := range sortedKeys(p.Clusters) {
			for _, r := range p.Clusters[name].Rejected {
				key := name + "\x00" + r.Object.String()
				if seen[key] {
					continue
				}
				seen[key] = true
				if n < most {
					lines = append(lines, fmt.Sprintf("%s: %s%s: %s", name, label, r.Object, r.Reason))
				}
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	if n > most {
		lines = append(lines, fmt.Sprintf("… and %d more", n-most))
	}
	return usererr.New("Manifests Rejected By The API Server",
		"A server-side dry-run of the new revision was rejected (schema, validation or admission), so nothing was applied anywhere:\n  "+
			strings.Join(lines, "\n  ")+
			"\nFix the objects, or the policy that rejects them; set preview = \"none\" to find out at apply instead.")
}

// previewListed is how many cluster names a preview line lists before counting the rest.
const previewListed = 10

// Text says what the preview found, sized for a plan at any fleet size: per cluster when few
// were dry-run, totals otherwise, and by name (at most previewListed) only the clusters that
// need attention: conflicts and clusters not previewed. "" when there is nothing to say.
func (p *Preview) Text() string {
	if p == nil || p.Mode == PreviewNone {
		return ""
	}
	if p.Skipped != "" {
		return "No cluster was dry-run: " + p.Skipped + "."
	}
	if len(p.Clusters) == 0 {
		return ""
	}
	var total apply.PreviewCounts
	var conflicting, notPreviewed, previewed []string
	for _, name := range sortedKeys(p.Clusters) {
		c := p.Clusters[name]
		if c.NotPreviewed != "" {
			notPreviewed = append(notPreviewed, name)
			continue
		}
		previewed = append(previewed, name)
		total.Add(c.Counts)
		if c.Counts.Conflicting > 0 {
			conflicting = append(conflicting, name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Server-side dry-run of the new revision (preview = %q, time budget %s): %d of %d clusters previewed",
		p.Mode, p.Budget, len(previewed), len(p.Clusters))
	switch {
	case len(previewed) == 0:
		b.WriteString(".")
	case len(previewed) <= 5:
		b.WriteString(":")
		for _, name := range previewed {
			fmt.Fprintf(&b, "\n  %s: %s", name, countsText(p.Clusters[name].Counts))
		}
	default:
		fmt.Fprintf(&b, ", objects in all: %s", countsText(total))
	}
	if len(conflicting) > 0 {
		fmt.Fprintf(&b, "\nConflicting fields on %d clusters (apply fails there unless force_conflicts): %s", len(conflicting), listed(conflicting))
		for _, name := range conflicting[:min(len(conflicting), 3)] {
			fmt.Fprintf(&b, "\n  %s: %s", name, p.Clusters[name].Conflicts[0])
		}
	}
	if len(notPreviewed) > 0 {
		reasons := map[string]int{}
		for _, name := range notPreviewed {
			reasons[p.Clusters[name].NotPreviewed]++
		}
		fmt.Fprintf(&b, "\nNot previewed, %d clusters (apply checks each before its wave; nothing is known of them): %s",
			len(notPreviewed), listed(notPreviewed))
		if len(reasons) == 1 {
			fmt.Fprintf(&b, " — %s", p.Clusters[notPreviewed[0]].NotPreviewed)
		} else {
			fmt.Fprintf(&b, " — mostly: %s", MostCommon(reasons))
		}
	}
	return b.String()
}

// NeedsAttention says whether the preview found what a reviewer should look at: conflicts, or
// clusters it could not preview.
func (p *Preview) NeedsAttention() bool {
	if p == nil {
		return false
	}
	for _, c := range p.Clusters {
		if c.NotPreviewed != "" || c.Counts.Conflicting > 0 {
			return true
		}
	}
	return false
}

func countsText(c apply.PreviewCounts) string {
	created := fmt.Sprintf("%d created", c.Created)
	if c.Unchecked > 0 {
		created += fmt.Sprintf(" (%d after the bundle's own CRDs or Namespaces, not dry-run)", c.Unchecked)
	}
	return fmt.Sprintf("%s, %d changed, %d unchanged, %d conflicting", created, c.Changed, c.Unchanged, c.Conflicting)
}

// listed names at most previewListed of names, and counts the rest.
func listed(names []string) string {
	if len(names) <= previewListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:previewListed], ", "), len(names)-previewListed)
}
