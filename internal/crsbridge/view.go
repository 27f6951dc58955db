package crsbridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// View is a bridge as a plan shows it: what it hands out, and the clusters that got modules
// from it and that the resource has not taken over yet (its records hold no such module there).
type View struct {
	Name      string
	Exists    bool
	Revisions map[string]string
	Joiners   []Joiner
	// Left are the joiners the selector no longer picks, before an apply took them over: what
	// the bridge gave them stays there (a ClusterResourceSet never deletes), and no apply of
	// the resource touches it.
	Left []Joiner
}

// Ready reads whether objs are ready on cluster now, as a verify judges them
// (delivery.Service.ReadyNow).
type Ready func(ctx context.Context, cluster string, objs []*unstructured.Unstructured) error

// Members says which modules the resource's records hold on cluster (none: it has not taken
// the cluster over).
type Members func(cluster string) []string

// ViewOf reads the bridge of key and the joiners it served: clusters Cluster API's
// ClusterResourceSetBinding says got a module from it and whose records (members) do not hold
// that module (joined since the last apply). picked, when not nil, are the clusters the
// resource picks now: a joiner outside it left. ready reads each joiner's health.
func (s *Store) ViewOf(ctx context.Context, key records.Key, namespace string, members Members, picked map[string]bool, ready Ready) (*View, error) {
	held, err := s.Read(ctx, key, namespace)
	if err != nil {
		return nil, err
	}
	given, err := s.Given(ctx, key, namespace, held)
	if err != nil {
		return nil, err
	}
	v := &View{Name: namespace + "/" + Name(key), Exists: held.Exists, Revisions: held.Revisions}
	for _, j := range given {
		has := members(j.Cluster)
		var fresh []Given
		for _, g := range j.Modules {
			if !slices.Contains(has, g.Module) {
				fresh = append(fresh, g)
			}
		}
		// A cluster Cluster API bound but could not reach yet has no module: waiting, listed
		// unless the resource has it already.
		waiting := len(j.Modules) == 0 && len(has) == 0
		switch {
		case len(fresh) == 0 && !waiting:
		case picked != nil && !picked[j.Cluster]:
			v.Left = append(v.Left, Joiner{Cluster: j.Cluster, Modules: fresh})
		default:
			v.Joiners = append(v.Joiners, Joiner{Cluster: j.Cluster, Modules: fresh})
		}
	}
	joinersHealth(ctx, held, v.Joiners, ready)
	return v, nil
}

// joinerReadTimeout bounds the read of one joiner's health at plan: a joiner whose API server
// does not answer in that time is said to be unreadable, and the plan goes on.
const joinerReadTimeout = 15 * time.Second

// joinerReads is how many joiners' health is read at once.
const joinerReads = 8

// joinersHealth sets each joiner's Health: how the objects of the modules Cluster API applied
// to it read now, as a verify judges them. A joiner given nothing yet is left unread.
func joinersHealth(ctx context.Context, held *Held, joiners []Joiner, ready Ready) {
	var g errgroup.Group
	g.SetLimit(joinerReads)
	for i := range joiners {
		j := &joiners[i]
		var objs []*unstructured.Unstructured
		for _, given := range j.Modules {
			if !given.Applied {
				continue
			}
			mod, err := held.Objects(given.Module)
			if err != nil {
				j.Health = "health not read: " + err.Error()
				break
			}
			objs = append(objs, mod...)
		}
		if len(objs) == 0 || j.Health != "" {
			continue
		}
		g.Go(func() error {
			readCtx, cancel := context.WithTimeout(ctx, joinerReadTimeout)
			defer cancel()
			j.Health = HealthText(ready(readCtx, j.Cluster, objs))
			return nil
		})
	}
	_ = g.Wait() // each read keeps its own outcome in its joiner
}

// HealthText says in a few words what a Ready read found.
func HealthText(err error) string {
	var nre *apply.NotReadyError
	switch {
	case err == nil:
		return "healthy"
	case errors.As(err, &nre) && nre.Unreadable():
		return "health not read: the cluster did not answer"
	case errors.As(err, &nre):
		// At most a few, named: the plan stays short at any bundle size.
		items := make([]string, 0, min(len(nre.Objects), 3))
		for _, o := range nre.Objects[:min(len(nre.Objects), 3)] {
			items = append(items, o.String())
		}
		if more := len(nre.Objects) - len(items); more > 0 {
			items = append(items, fmt.Sprintf("%d more", more))
		}
		return "not ready: " + strings.Join(items, "; ")
	default:
		return "health not read: " + err.Error()
	}
}

// Text says, for a plan, what the bridge hands out now and, with moving ("module revision"
// each), what it moves to once verified, and lists the clusters that got modules from it since
// the last apply (which the apply takes over) and those that left before.
func (v *View) Text(moving []string, subject string) string {
	var b strings.Builder
	if v.Exists {
		fmt.Fprintf(&b, "ClusterResourceSet %s hands joiners: %s.", v.Name, RevisionsText(v.Revisions))
	} else {
		fmt.Fprintf(&b, "Apply creates ClusterResourceSet %s.", v.Name)
	}
	if len(moving) > 0 {
		fmt.Fprintf(&b, " It moves to %s once %s verifies it (never to a revision recorded invalid).", strings.Join(moving, ", "), subject)
	}
	if len(v.Joiners) > 0 {
		b.WriteString("\nJoined since the last apply, given by the bridge (this apply takes them over):")
		for _, j := range v.Joiners {
			fmt.Fprintf(&b, "\n  %s: %s", j.Cluster, j.String())
		}
	}
	if len(v.Left) > 0 {
		b.WriteString("\nLeft before an apply took them over (no longer picked; what the bridge gave them stays there, and no apply removes it):")
		for _, j := range v.Left {
			fmt.Fprintf(&b, "\n  %s: %s", j.Cluster, j.String())
		}
	}
	return b.String()
}

// RevisionsText is "module revision, ..." sorted by module, or "nothing yet".
func RevisionsText(revs map[string]string) string {
	if len(revs) == 0 {
		return "nothing yet"
	}
	parts := make([]string, 0, len(revs))
	for _, m := range slices.Sorted(maps.Keys(revs)) {
		parts = append(parts, m+" "+revs[m])
	}
	return strings.Join(parts, ", ")
}

// Move reads what the bridge of b.Key holds, decides from inputs (given what it held)
// what it hands out now, and writes it: a module that moved is written from objects(module),
// with fieldManager(module) as its AnnotationBridge. b.Modules is filled here.
func (s *Store) Move(ctx context.Context, b Bridge, inputs func(held *Held) ([]Input, error),
	objects func(module string) []*unstructured.Unstructured, fieldManager func(module string) string) ([]Choice, error) {
	held, err := s.Read(ctx, b.Key, b.Namespace)
	if err != nil {
		return nil, err
	}
	in, err := inputs(held)
	if err != nil {
		return nil, err
	}
	choices := Decide(in)
	for _, c := range choices {
		if c.Revision == "" {
			continue
		}
		carried := Carried{Module: c.Module, Revision: c.Revision, FieldManager: fieldManager(c.Module)}
		if c.Moved {
			carried.Objects = objects(c.Module)
		}
		b.Modules = append(b.Modules, carried)
	}
	return choices, s.Write(ctx, b)
}
