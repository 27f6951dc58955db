package ownerupdate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/settings"
	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// Updater carries out in-place update plans (owners.PlanResult, owners.ClusterPlan) against one
// management cluster: it holds the owners' Leases, creates the rotated templates, writes the
// owners or a Cluster's spec.topology, and waits until Cluster API is done.
type Updater struct {
	// Client writes the management cluster (templates, owners, Clusters, Leases).
	Client client.Client
	// Reader looks at the owners, machines and Nodes while an update is waited for.
	Reader *owners.Reader
	// Settings are the provider's: LeaseDuration is the Lease held per owner; unset, it takes
	// its default.
	Settings settings.Settings
}

// ExecuteRequest is one apply of a plan.
type ExecuteRequest struct {
	// VerifyTimeout bounds the wait for the owner and its machines to be up to date.
	VerifyTimeout time.Duration
	// Clock defaults to the wall clock.
	Clock engine.Clock
	// Logf receives progress lines.
	Logf func(msg string, fields map[string]any)
	// Holder, when set, is the identity (records.HolderIdentity) under which Execute takes the
	// Lease of the owner (LeaseKeys) before it changes anything, in LeaseNamespace of the
	// management cluster (records.DefaultNamespace when empty), for the provider's
	// lease_duration (Updater.Settings). The wait stops, as on cancellation, when it is lost.
	Holder         string
	LeaseNamespace string
}

// Execution is what Execute did.
type Execution struct {
	// Status of every machine, by name (see the Status constants).
	Status map[string]string
	// Templates are the names of the templates created (rotated).
	Templates []string
	// OwnerChanged: the owner's spec was written.
	OwnerChanged bool
}

// Execute writes the change to the owner and lets Cluster API carry it out: the rotated
// templates are created, the owner is pointed at them (and gets the version), and Execute waits
// until the owner and every one of its machines are up to date by CAPI's own account, none is
// updating, and every Node is Ready on the desired kubelet version. It never writes a Machine,
// an infrastructure machine or a bootstrap config. A blocked plan is refused before anything is
// written.
func (up *Updater) Execute(ctx context.Context, res *owners.PlanResult, req ExecuteRequest) (*Execution, error) {
	if err := res.Plan.Err(); err != nil {
		return nil, engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, inplace.BlockedSummary, inplace.BlockedLead+"."))
	}
	if req.Clock == nil {
		req.Clock = engine.SystemClock{}
	}
	if req.Logf == nil {
		req.Logf = func(string, map[string]any) {}
	}
	out := &Execution{Status: map[string]string{}}
	for _, m := range res.Machines {
		out.Status[m.Plan.Machine] = owners.StatusNotStarted
	}
	if req.Holder != "" {
		runCtx, release, err := up.holdLeases(ctx, LeaseKeys(res.Request.Selection, res.Machines), req)
		if err != nil {
			return out, err
		}
		defer release()
		ctx = runCtx // cancelled, with the reason, if the Lease is lost
	}
	o := res.Owner
	for _, t := range o.Templates {
		created, err := up.ensureTemplate(ctx, t)
		if err != nil {
			return out, err
		}
		if created {
			out.Templates = append(out.Templates, t.GetName())
			req.Logf(fmt.Sprintf("created %s %s/%s for %s", t.GetKind(), t.GetNamespace(), t.GetName(), o.Name()), nil)
		}
	}
	patch, err := owners.SpecPatch(o.Current.Object, o.Desired.Object)
	if err != nil {
		return out, err
	}
	if patch != nil || o.Current.GetAnnotations()[owners.AnnotationRevision] != res.Revision {
		if err := up.writeOwner(ctx, o, patch, res.Revision); err != nil {
			return out, err
		}
		out.OwnerChanged = patch != nil
		req.Logf(fmt.Sprintf("wrote the change to %s (revision %s); Cluster API rolls it out", o.Name(), res.Revision), nil)
	}
	st, err := up.waitUpToDate(ctx, res, req)
	for name, s := range st {
		out.Status[name] = s
	}
	return out, err
}

// ensureTemplate creates a rotated template; one of that name that exists already must hold the
// same spec (it was created by an earlier apply of the same change), else the apply stops.
func (up *Updater) ensureTemplate(ctx context.Context, t *unstructured.Unstructured) (bool, error) {
	if err := records.Fenced(ctx); err != nil {
		return false, err // the Lease may be another apply's now: write nothing
	}
	err := up.Client.Create(ctx, t.DeepCopy())
	if err == nil {
		return true, nil
	}
	what := fmt.Sprintf("%s %s/%s", t.GetKind(), t.GetNamespace(), t.GetName())
	if !apierrors.IsAlreadyExists(err) {
		return false, usererr.Wrap(err, "Cannot Create Template", "Creating "+what+" (the rotated template) failed; nothing else was changed.")
	}
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(t.GroupVersionKind())
	if err := up.Client.Get(ctx, client.ObjectKeyFromObject(t), have); err != nil {
		return false, usererr.Wrap(err, "Cannot Read Template", "Reading "+what+" failed.")
	}
	if patch, err := owners.SpecPatch(have.Object, t.Object); err != nil || patch != nil {
		return false, engine.Mark(engine.ErrChangeRefused, usererr.New("Template Name Taken",
			fmt.Sprintf("%s exists with another spec than the rotated template this change needs (its name is a hash of its content, so someone edited it). Delete or restore it, then apply again.", what)))
	}
	return false, nil
}

// writeOwner merge-patches the owner's spec and records the revision, under the resourceVersion
// the plan read: an owner whose spec changed since is a conflict, and the apply stops rather than
// overwrite. Cluster API's controllers write an owner's status (and metadata) all the time, a
// fresh one especially, which moves its resourceVersion without changing what the plan read: on
// a conflict the owner is read again, and the patch is sent again under the new resourceVersion
// when its spec is still the one the plan read.
func (up *Updater) writeOwner(ctx context.Context, o *owners.Owner, specPatchJSON []byte, revision string) error {
	doc := map[string]any{}
	if specPatchJSON != nil {
		if err := json.Unmarshal(specPatchJSON, &doc); err != nil {
			return err
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.Current.GroupVersionKind())
	u.SetNamespace(o.Current.GetNamespace())
	u.SetName(o.Current.GetName())
	resourceVersion := o.Current.GetResourceVersion()
	for attempt := 1; ; attempt++ {
		doc["metadata"] = map[string]any{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]any{owners.AnnotationRevision: revision},
		}
		raw, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if err := records.Fenced(ctx); err != nil {
			return err // the Lease may be another apply's now: write nothing
		}
		err = up.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, raw))
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return usererr.Wrap(err, "Cannot Write Owner", "Writing the change to "+o.Name()+" failed (templates created by this apply stay, unused).")
		}
		fresh, same := up.specUnchanged(ctx, o)
		if !same || attempt == maxStatusConflicts {
			return engine.Mark(engine.ErrChangeRefused, usererr.Wrap(err, "Owner Changed Since The Plan", o.Name()+" was changed after the plan read it; plan again."))
		}
		resourceVersion = fresh
	}
}

// maxStatusConflicts bounds how often writeOwner sends its patch again after a conflict that
// only the owner's status caused.
const maxStatusConflicts = 5

// specUnchanged reads o again and reports its resourceVersion now and whether its spec is still
// the one the plan read (false too when it cannot be read).
func (up *Updater) specUnchanged(ctx context.Context, o *owners.Owner) (string, bool) {
	now := &unstructured.Unstructured{}
	now.SetGroupVersionKind(o.Current.GroupVersionKind())
	if err := up.Client.Get(ctx, client.ObjectKeyFromObject(o.Current), now); err != nil {
		return "", false
	}
	return now.GetResourceVersion(), equality.Semantic.DeepEqual(now.Object["spec"], o.Current.Object["spec"])
}

// waitUpToDate polls the owner, its machines and their Nodes until everything is up to date
// (see upToDate) or VerifyTimeout passes; the error then names the cluster, the owner and what
// the last look found wrong, machine by machine.
func (up *Updater) waitUpToDate(ctx context.Context, res *owners.PlanResult, req ExecuteRequest) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, req.VerifyTimeout)
	defer cancel()
	var last *owners.Look
	var lastErr error
	for {
		l, err := up.Reader.LookAt(ctx, res)
		if err == nil {
			last, lastErr = l, nil
			if len(l.Problems) == 0 {
				return l.Status(res), nil
			}
		} else {
			lastErr = err
		}
		if sleepErr := req.Clock.Sleep(ctx, 2*time.Second); sleepErr != nil {
			sel := res.Request.Selection
			var lines []string
			if last != nil {
				lines = last.Problems
			}
			if lastErr != nil {
				lines = append(lines, lastErr.Error())
			}
			var st map[string]string
			if last != nil {
				st = failUnfinished(last.Status(res))
			}
			return st, usererr.Wrap(notVerified(strings.Join(lines, "\n")), "In-Place Update Not Verified",
				fmt.Sprintf("Cluster %s/%s, %s: the change was written, but Cluster API did not bring every machine up to date within %s "+
					"(%v). Cluster API goes on with it; look at the machines named below, then apply again to verify.",
					sel.Namespace, sel.Cluster, res.Owner.Name(), req.VerifyTimeout, context.Cause(ctx)))
		}
	}
}

// ErrNotVerified marks an update Cluster API did not finish within the verify timeout: the
// change's failure on that cluster (it counts against a fleet update's failure budget), unlike an
// API server that could not be reached. blame classifies it (blame.ErrNotUpToDate).
var ErrNotVerified = blame.ErrNotUpToDate

// notVerified is what the last look found wrong, as an ErrNotVerified.
type notVerified string

func (e notVerified) Error() string        { return string(e) }
func (e notVerified) Is(target error) bool { return target == ErrNotVerified }

// failUnfinished marks failed every machine of status but those replaced or unchanged: the wait
// ran out before Cluster API brought the owner up to date, so no machine of it counts as
// updated. It returns status.
func failUnfinished(status map[string]string) map[string]string {
	for name, s := range status {
		if s != owners.StatusReplaced && s != owners.StatusUnchanged {
			status[name] = owners.StatusFailed
		}
	}
	return status
}
