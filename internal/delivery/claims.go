package delivery

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Claim is an object of a spec that another key already holds on a cluster: its records do,
// or its field manager manages the live object.
type Claim struct {
	Cluster string
	Object  string
	Owner   records.Key
	// Manager is the other key's field manager when it does not say which key it is (a
	// shortened one, see records.Key.FieldManager); Owner is then zero.
	Manager string
	// Kustomization is the Flux Kustomization ("namespace/name") that applied the object, when it
	// is not one of this provider's (Owner is then zero).
	Kustomization string
}

// owner names the claim's owner: its key, or else the Flux Kustomization or field manager.
func (c Claim) owner() string {
	if c.Owner == (records.Key{}) && c.Kustomization != "" {
		return "Flux Kustomization " + c.Kustomization
	}
	if c.Owner == (records.Key{}) {
		return records.DescribeFieldManager(c.Manager)
	}
	return c.Owner.Describe()
}

// Claims reports, for each of clusters, the objects of spec that another key holds there: the
// current (or in-flight) revision of another key with records in spec's record namespace, or
// another key's field manager on the live object (whatever record namespace that key keeps its
// records in). Two owners would apply and prune the same object. ignore, when not nil, exempts
// keys (e.g. the rollout a plan replaces).
func (s *Service) Claims(ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool) ([]Claim, error) {
	claims, _, err := s.ownership(ctx, spec, clusters, ignore, true, false)
	return claims, err
}

// Ownership is Claims and Adoptions in one read of each cluster (its records and the live
// objects of spec, each read once), for a plan that needs both: a claim refuses the plan, and
// the adoptions are what apply would take over when nothing refuses.
func (s *Service) Ownership(ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool) ([]Claim, []Found, error) {
	return s.ownership(ctx, spec, clusters, ignore, true, true)
}

// ownership reads, for each of clusters, the claims on spec's objects (withClaims) and the
// objects someone else made that apply would adopt (withAdoptions). Flux mode asks no workload
// cluster, and adopts nothing: Flux applies and prunes by its own inventory.
func (s *Service) ownership(ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool, withClaims, withAdoptions bool) ([]Claim, []Found, error) {
	return s.engine.ownership(s, ctx, spec, clusters, ignore, withClaims, withAdoptions)
}

// ownership is Service.ownership delivering directly.
func (directEngine) ownership(s *Service, ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool, withClaims, withAdoptions bool) ([]Claim, []Found, error) {
	var (
		mu     sync.Mutex
		claims []Claim
		found  []Found
	)
	errs := s.forEach(ctx, clusters, func(ctx context.Context, name string) error {
		c, f, err := s.clusterOwnership(ctx, spec, name, ignore, withClaims, withAdoptions)
		mu.Lock()
		defer mu.Unlock()
		claims, found = append(claims, c...), append(found, f...)
		return err
	})
	if len(errs) > 0 {
		var lines []string
		for _, name := range sortedKeys(errs) {
			lines = append(lines, fmt.Sprintf("%s: %v", name, errs[name]))
		}
		what := "read which objects exist already"
		if withClaims {
			what = "read the records of other rollouts"
		}
		return nil, nil, fmt.Errorf("%s:\n  %s", what, strings.Join(lines, "\n  "))
	}
	slices.SortFunc(found, func(a, b Found) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Object, b.Object))
	})
	return dedupeClaims(claims), found, nil
}

// clusterOwnership is ownership on one cluster. The live objects are read once: all of spec's
// when claims are wanted (any of them may be another key's), else only those that the
// rollout's records neither hold nor adopted (freshOf), the only ones apply could adopt.
func (s *Service) clusterOwnership(ctx context.Context, spec Spec, name string, ignore func(records.Key) bool, withClaims, withAdoptions bool) ([]Claim, []Found, error) {
	c, objs, err := s.clusterObjects(ctx, spec, name)
	if err != nil {
		return nil, nil, err
	}
	store := records.NewWorkloadStore(c.client, spec.RecordNamespace)
	read, fresh := objs, map[manifest.Identity]bool{}
	if withAdoptions {
		state, err := store.Load(ctx, spec.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("read records: %w", err)
		}
		freshObjs := freshOf(state, objs)
		for _, obj := range freshObjs {
			fresh[manifest.IdentityOf(obj)] = true
		}
		if !withClaims {
			read = freshObjs
		}
	}
	var existing []apply.Existing
	if len(read) > 0 {
		if existing, err = c.applier.Existing(ctx, read); err != nil {
			return nil, nil, fmt.Errorf("read which objects exist already: %w", err)
		}
	}
	var found []Found
	for _, e := range existing {
		if fresh[e.Object.Identity()] && e.Foreign(c.manager) && !e.Bridged(c.manager) {
			found = append(found, Found{Cluster: name, Object: e.Object.String(), Managers: e.Managers})
		}
	}
	if !withClaims {
		return nil, found, nil
	}
	claims := claimsOf(existing, name, c.manager, ignore)
	others, err := recordClaims(ctx, store, spec.Key, name, objs, ignore)
	return append(claims, others...), found, err
}

// recordClaims lists the objects of objs that another key's current (or in-flight) revision
// holds in store, the records of the record namespace on cluster name. Namespaces may be shared.
func recordClaims(ctx context.Context, store *records.WorkloadStore, own records.Key, name string, objs []*unstructured.Unstructured, ignore func(records.Key) bool) ([]Claim, error) {
	want := map[manifest.Identity]bool{}
	for _, obj := range objs {
		want[manifest.IdentityOf(obj)] = true
	}
	keys, err := store.Keys(ctx)
	if err != nil {
		return nil, err
	}
	var out []Claim
	for _, key := range keys {
		if key == own || (ignore != nil && ignore(key)) {
			continue
		}
		state, err := store.Load(ctx, key)
		if err != nil {
			return nil, err
		}
		for _, rev := range []*records.Revision{state.Current, state.Provisioning} {
			if rev == nil {
				continue
			}
			for _, ref := range rev.Inventory {
				if want[ref.Identity()] && ref.Kind != "Namespace" {
					out = append(out, Claim{Cluster: name, Object: ref.String(), Owner: key})
				}
			}
		}
	}
	return out, nil
}

// managerClaims lists the objects of objs on cluster (reached by c) that another key's field
// manager manages: another rollout or module assignment applied them, in any record
// namespace. It reads only (apply.Applier.Existing).
func managerClaims(ctx context.Context, c *conn, cluster string, objs []*unstructured.Unstructured, ignore func(records.Key) bool) ([]Claim, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	found, err := c.applier.Existing(ctx, objs)
	if err != nil {
		return nil, fmt.Errorf("read which objects exist already: %w", err)
	}
	return claimsOf(found, cluster, c.manager, ignore), nil
}

// claimsOf lists the objects of found that a key's field manager other than own manages.
// Namespaces may be shared, and the legacy field manager is every key's. ignore, when not nil,
// exempts keys.
func claimsOf(found []apply.Existing, cluster, own string, ignore func(records.Key) bool) []Claim {
	var out []Claim
	for _, e := range found {
		if e.Object.Group == "" && e.Object.Kind == "Namespace" {
			continue
		}
		for _, m := range e.Managers {
			if m == own || m == records.LegacyFieldManager || !records.IsFieldManager(m) {
				continue
			}
			claim := Claim{Cluster: cluster, Object: e.Object.String(), Manager: m}
			if key, ok := records.ParseFieldManager(m); ok {
				if ignore != nil && ignore(key) {
					continue
				}
				claim.Owner, claim.Manager = key, ""
			}
			out = append(out, claim)
		}
	}
	return out
}

// CheckOwners refuses, before anything is written, objects of spec that another key's field
// manager manages on clusters: the apply-time half of the plan's Claims, which works across
// record namespaces. A cluster that cannot be read is left to its wave, where provisioning
// makes the same check of the objects the rollout does not hold yet (see adoptions).
func (s *Service) CheckOwners(ctx context.Context, spec Spec, clusters []string) error {
	return s.engine.checkOwners(s, ctx, spec, clusters)
}

// checkOwners is CheckOwners delivering directly.
func (directEngine) checkOwners(s *Service, ctx context.Context, spec Spec, clusters []string) error {
	var (
		mu  sync.Mutex
		out []Claim
	)
	s.forEach(ctx, clusters, func(ctx context.Context, name string) error {
		c, objs, err := s.clusterObjects(ctx, spec, name)
		if err != nil {
			return err
		}
		claims, err := managerClaims(ctx, c, name, objs, nil)
		mu.Lock()
		out = append(out, claims...)
		mu.Unlock()
		return err
	})
	if len(out) == 0 {
		return nil
	}
	return ClaimsError(dedupeClaims(out), spec.Key.Describe())
}

func dedupeClaims(in []Claim) []Claim {
	seen := map[Claim]bool{}
	var out []Claim
	for _, c := range in {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sortClaims(out)
	return out
}

func sortClaims(cs []Claim) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Cluster != cs[j].Cluster {
			return cs[i].Cluster < cs[j].Cluster
		}
		return cs[i].Object < cs[j].Object
	})
}

// ClaimsError is the user-facing error for claims, made by mine (a key's description).
func ClaimsError(claims []Claim, mine string) error {
	var lines []string
	for _, c := range claims {
		lines = append(lines, fmt.Sprintf("%s in cluster %s is managed by %s", c.Object, c.Cluster, c.owner()))
	}
	return usererr.New("Object Claimed By Two Owners",
		fmt.Sprintf("%s would manage objects another owner already manages, and each would overwrite and prune the other's:\n  %s\n"+
			"Remove the objects from one of the two, or destroy the other owner first.", mine, strings.Join(lines, "\n  ")))
}

// ManagementClient is the management cluster's client, for records that live beside the
// rollouts' own (e.g. module bindings).
func (s *Service) ManagementClient() client.Client { return s.mgmt.Client }

// Discover lists the Clusters q picks, as Observe sees them.
func (s *Service) Discover(ctx context.Context, q fleet.Query) (*fleet.Discovery, error) {
	return s.fleetOf(ctx, q)
}
