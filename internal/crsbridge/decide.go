// Package crsbridge gives a cluster that joins a module assignment (or a rollout) between applies
// the fleet's last verified revision of each module (of the rollout's bundle), through Cluster
// API's own ClusterResourceSet controller: the provider keeps, per assignment, one
// ClusterResourceSet (strategy ApplyOnce, the assignment's selector) and one ConfigMap per module,
// in depends_on order, holding the revision the bridge hands out. Nothing of ours runs between applies; the next apply finds the
// joiner, lists it, and takes it over as an ordinary member (the objects the bridge created
// carry the module's bridge annotation, so they are the module's own, not adopted).
//
// What the bridge hands out is decided here (Decide, a pure function of what the run verified,
// what the bridge held and the invalid ledger); the objects it is made of are built by Bridge,
// written, read and removed in the management cluster by Store, and shown to a plan by View.
package crsbridge

import (
	"fmt"
	"slices"
)

// Input is one module as the apply left it, in depends_on order.
type Input struct {
	Module    string
	DependsOn []string
	// Configured is the module's configured revision.
	Configured string
	// Verified says a cluster of the fleet holds Configured, applied and verified (its binding
	// says so) and none was restored from it: the fleet verified it.
	Verified bool
	// Held is the revision the bridge hands out before this apply ("" when none).
	Held string
	// Invalid are the module's revisions recorded invalid (its ledger).
	Invalid []string
	// Unverified says, when Verified is false, why, in place of "is not verified on any cluster
	// yet" (a rollout asks more: every cluster it picks on the revision).
	Unverified string
}

// Choice is what the bridge hands out for one module after the apply.
type Choice struct {
	Module string
	// Revision is "" when the bridge carries nothing of the module.
	Revision string
	// Moved says the revision is the configured one, newly verified (the bridge's ConfigMap is
	// rewritten from the configuration); false: the bridge keeps what it held (its ConfigMap is
	// the only copy of that revision's objects and is left as it is).
	Moved bool
	// Why says, when Revision is "" or not the configured one, why.
	Why string
}

// Decide chooses, for each module, the revision the bridge hands to joiners: the configured
// revision once the fleet verified it; otherwise the one the bridge held, unless it has been
// recorded invalid since; otherwise none. A revision recorded invalid is never handed out, even
// if a cluster verified it before (retry_invalid applies it to members, not to joiners). A module
// whose dependency the bridge cannot carry is not carried either: a joiner would get it without
// what it needs.
func Decide(inputs []Input) []Choice {
	out := make([]Choice, 0, len(inputs))
	carried := map[string]bool{}
	for _, in := range inputs {
		c := Choice{Module: in.Module}
		unverified := in.Unverified
		if unverified == "" {
			unverified = "is not verified on any cluster yet"
		}
		switch {
		case in.Verified && !slices.Contains(in.Invalid, in.Configured):
			c.Revision, c.Moved = in.Configured, in.Configured != in.Held
		case in.Held != "" && !slices.Contains(in.Invalid, in.Held):
			c.Revision = in.Held
			if in.Held != in.Configured && slices.Contains(in.Invalid, in.Configured) {
				c.Why = fmt.Sprintf("%s is recorded invalid; joiners get %s, the last verified", in.Configured, in.Held)
			} else if in.Held != in.Configured {
				c.Why = fmt.Sprintf("%s %s; joiners get %s, the last verified", in.Configured, unverified, in.Held)
			}
		case in.Held != "":
			c.Why = fmt.Sprintf("%s, which the bridge held, is recorded invalid and %s is not verified yet", in.Held, in.Configured)
		case slices.Contains(in.Invalid, in.Configured):
			c.Why = fmt.Sprintf("%s is recorded invalid", in.Configured)
		default:
			c.Why = fmt.Sprintf("%s %s", in.Configured, unverified)
		}
		for _, d := range in.DependsOn {
			if c.Revision != "" && !carried[d] {
				c.Revision, c.Moved, c.Why = "", false, fmt.Sprintf("module %q, which it depends on, is not carried", d)
			}
		}
		carried[in.Module] = c.Revision != ""
		out = append(out, c)
	}
	return out
}
