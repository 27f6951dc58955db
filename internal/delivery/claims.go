package delivery

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Claim is an object of a spec that another key's records on a cluster already hold.
type Claim struct {
	Cluster string
	Object  string
	Owner   records.Key
}

// Claims reports, for each of clusters, the objects of spec that the current (or in-flight)
// revision of another key holds there: two owners would apply and prune the same object. Both
// use the same field manager, so server-side apply alone would never see the conflict.
// ignore, when not nil, exempts keys (e.g. the caller's own other modules).
func (s *Service) Claims(ctx context.Context, spec Spec, clusters []string, ignore func(records.Key) bool) ([]Claim, error) {
	want := map[manifest.Identity]bool{}
	for _, obj := range spec.Objects.Objects {
		want[manifest.IdentityOf(obj)] = true
	}
	var (
		mu  sync.Mutex
		out []Claim
	)
	errs := s.forEach(ctx, clusters, func(ctx context.Context, name string) error {
		c, err := s.cluster(ctx, spec.ClusterNamespace, name, false)
		if err != nil {
			return err
		}
		store := records.NewWorkloadStore(c.client, spec.RecordNamespace)
		keys, err := store.Keys(ctx)
		if err != nil {
			return err
		}
		for _, key := range keys {
			if key == spec.Key || (ignore != nil && ignore(key)) {
				continue
			}
			state, err := store.Load(ctx, key)
			if err != nil {
				return err
			}
			for _, rev := range []*records.Revision{state.Current, state.Provisioning} {
				if rev == nil {
					continue
				}
				for _, ref := range rev.Inventory {
					if want[ref.Identity()] && ref.Kind != "Namespace" {
						mu.Lock()
						out = append(out, Claim{Cluster: name, Object: ref.String(), Owner: key})
						mu.Unlock()
					}
				}
			}
		}
		return nil
	})
	if len(errs) > 0 {
		var lines []string
		for _, name := range sortedKeys(errs) {
			lines = append(lines, fmt.Sprintf("%s: %v", name, errs[name]))
		}
		return nil, fmt.Errorf("read the records of other rollouts:\n  %s", strings.Join(lines, "\n  "))
	}
	return dedupeClaims(out), nil
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
		lines = append(lines, fmt.Sprintf("%s in cluster %s is managed by %s", c.Object, c.Cluster, c.Owner.Describe()))
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
	return s.discover(ctx, q)
}
