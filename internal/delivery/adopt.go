package delivery

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Adoption: an object of the bundle that is on a cluster before the rollout first applies it
// was made by someone else (kubectl, Helm, another tool). The rollout takes it over (server-side
// apply), records it as adopted in the revision record it writes before applying, and never
// deletes it: restore, prune and destroy give it back instead (apply.Applier.Release), and a
// revision that fails before any good one puts back the content it had (apply.Applier.Revert).

// adoptions returns what the provisioning record of a change to objs must say was adopted:
// what the records adopted already, and the objects of objs that no record holds and that are
// on the cluster, made by someone else. Those another rollout or module assignment manages (its
// field manager is on them) are not someone else's to adopt: they are returned as claims, for
// the caller to refuse. It reads only. Sorted, so that the record written again by a retry is
// the same.
//
// When the records hold nothing of the rollout, objects of objs under its own field manager
// are objects of the rollout whose records are gone (unrecorded.go): with adoptUnrecorded they
// are adopted like someone else's, otherwise they are returned as unrecorded, for the caller
// to hold the cluster back.
//
// bridged are the objects the key's own bridge created (apply.Existing.Bridged): the caller
// takes them over (apply.Applier.TakeOver) once the provisioning record holds them.
func adoptions(ctx context.Context, c *conn, cluster string, state *records.State, objs []*unstructured.Unstructured, adoptUnrecorded bool) (
	adopted []records.Adopted, claims []Claim, unrecorded []string, bridged []apply.ObjectRef, err error) {
	prior := state.AdoptedOf()
	fresh := freshOf(state, objs)
	adopted = make([]records.Adopted, 0, len(prior))
	for _, a := range prior {
		adopted = append(adopted, a)
	}
	if len(fresh) > 0 {
		found, err := c.applier.Existing(ctx, fresh)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("read which objects exist already: %w", err)
		}
		claims = claimsOf(found, cluster, c.manager, nil)
		if holdsNothing(state) && !adoptUnrecorded {
			unrecorded = ownObjects(found, c.manager)
		}
		taken := map[string]bool{}
		if holdsNothing(state) && adoptUnrecorded {
			for _, name := range ownObjects(found, c.manager) {
				taken[name] = true
			}
		}
		for _, e := range found {
			// What the assignment's own bridge created on a joiner is the module's: taken over
			// as it is, never adopted (internal/crsbridge).
			if e.Bridged(c.manager) && !taken[e.Object.String()] {
				bridged = append(bridged, e.Object)
				continue
			}
			if e.Foreign(c.manager) || taken[e.Object.String()] {
				adopted = append(adopted, records.Adopted{Object: e.Object, Managers: e.Managers, Saved: e.Saved, SavedSize: e.SavedSize})
			}
		}
	}
	slices.SortFunc(adopted, func(a, b records.Adopted) int { return compareIdentity(a.Object.Identity(), b.Object.Identity()) })
	return adopted, claims, unrecorded, bridged, nil
}

// freshOf is the objects of objs that state neither holds (any revision's inventory) nor
// adopted: the ones that, when on the cluster already, someone else made.
func freshOf(state *records.State, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	prior := state.AdoptedOf()
	ours := map[manifest.Identity]bool{}
	for _, ref := range previousInventory(state, "") {
		ours[ref.Identity()] = true
	}
	var fresh []*unstructured.Unstructured
	for _, obj := range objs {
		id := manifest.IdentityOf(obj)
		if _, adopted := prior[id]; !adopted && !ours[id] {
			fresh = append(fresh, obj)
		}
	}
	return fresh
}

func compareIdentity(a, b manifest.Identity) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// splitAdopted parts inv into what the rollout made (which it may delete) and what it adopted.
func splitAdopted(inv apply.Inventory, adopted map[manifest.Identity]records.Adopted) (made apply.Inventory, taken []records.Adopted) {
	for _, ref := range inv {
		if a, ok := adopted[ref.Identity()]; ok {
			taken = append(taken, a)
		} else {
			made = append(made, ref)
		}
	}
	return made, taken
}

// giveBack hands adopted objects back to their other owners. Those revert picks whose content
// was saved are first put back as they were before the rollout adopted them (the revision that
// adopted them failed: nothing of it may stay); the others keep what the rollout last applied.
// It returns a note for the outcome, "" when there was nothing to give back.
func giveBack(ctx context.Context, applier objectApplier, target string, adopted []records.Adopted, revert func(records.Adopted) bool) (string, error) {
	if len(adopted) == 0 {
		return "", nil
	}
	var saved []*unstructured.Unstructured
	var release []apply.ObjectRef
	var names, unsaved []string
	for _, a := range adopted {
		names = append(names, a.Object.String())
		undo := revert(a)
		if undo && len(a.Saved) > 0 {
			set, err := manifest.FromCanonical(append(append([]byte("["), a.Saved...), ']'))
			if err != nil {
				return "", fmt.Errorf("saved content of adopted %s: %w", a.Object, err)
			}
			saved = append(saved, set.Objects...)
			continue
		}
		if undo {
			unsaved = append(unsaved, fmt.Sprintf("%s (%d bytes)", a.Object, a.SavedSize))
		}
		release = append(release, a.Object)
	}
	if err := applier.Revert(ctx, saved); err != nil {
		return "", fmt.Errorf("put adopted objects back as they were: %w", err)
	}
	if err := applier.Release(ctx, release); err != nil {
		return "", fmt.Errorf("give adopted objects back: %w", err)
	}
	note := fmt.Sprintf("%s: %s adopted (they existed before the rollout), so left in place and given back to their other field managers: %s",
		target, countNoun(len(adopted), "object was", "objects were"), strings.Join(names, ", "))
	if len(saved) > 0 {
		note += fmt.Sprintf("; %d put back to their content from before the rollout", len(saved))
	}
	if len(unsaved) > 0 {
		note += "; too large to have been saved, so left as the failed revision applied them: " + strings.Join(unsaved, ", ")
	}
	return note, nil
}

// never and always are giveBack's revert choices for prune and destroy (the content the rollout
// applied was accepted: a good revision ran) and for a return to nothing (none ran).
func never(records.Adopted) bool  { return false }
func always(records.Adopted) bool { return true }

// adoptedSince picks the adopted objects that the record of revision does not list: adopted by
// a later revision, the one being undone. Restoring revision puts them back as they were.
func adoptedSince(state *records.State, revision string) func(records.Adopted) bool {
	before := map[manifest.Identity]bool{}
	for _, r := range allRecords(state) {
		if r.Revision == revision {
			for _, a := range r.Adopted {
				before[a.Object.Identity()] = true
			}
		}
	}
	return func(a records.Adopted) bool { return !before[a.Object.Identity()] }
}

func countNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Found is an object of a bundle that exists on a cluster, made by someone else, and that the
// rollout's records do not hold: the next apply adopts it.
type Found struct {
	Cluster  string
	Object   string
	Managers []string
}

// Adoptions reports, for each of clusters, the objects of spec that exist there already, made
// by someone else, and that the rollout's records do not hold: the next apply would adopt them.
// It reads only.
func (s *Service) Adoptions(ctx context.Context, spec Spec, clusters []string) ([]Found, error) {
	_, found, err := s.ownership(ctx, spec, clusters, nil, false, true)
	return found, err
}

// DescribeFound lists found objects for a plan message, at most limit lines.
func DescribeFound(found []Found, limit int) string {
	var lines []string
	for i, f := range found {
		if i == limit {
			lines = append(lines, fmt.Sprintf("… and %d more", len(found)-limit))
			break
		}
		managers := "no field manager"
		if len(f.Managers) > 0 {
			managers = "managed by " + strings.Join(f.Managers, ", ")
		}
		lines = append(lines, fmt.Sprintf("cluster %s: %s (%s)", f.Cluster, f.Object, managers))
	}
	return strings.Join(lines, "\n  ")
}

// AdoptRefused is the plan-time error of adopt = false when objects exist already.
func AdoptRefused(found []Found, mine string) error {
	return usererr.New("Objects Exist Already",
		fmt.Sprintf("%s has adopt = false, and these objects of its manifests exist already, made by someone else:\n  %s\n"+
			"Nothing was applied. Delete them, leave them out of the manifests, or set adopt = true to take them over "+
			"(adopted objects are never deleted by the rollout: restore, prune and destroy give them back).",
			mine, DescribeFound(found, 20)))
}
