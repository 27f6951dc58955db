package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
	"github.com/gradual-dev/terraform-provider-gradual/internal/health"
)

// WithHealth returns an Applier whose waits judge the kinds c has expressions for by them
// instead of kstatus (Flux's healthCheckExprs; see internal/health): a kstatus-ready Deployment
// whose `current` expression is not true yet is waited for, and one whose `failed` expression
// is true fails the wait at once.
func (a *Applier) WithHealth(c *health.Checker) *Applier {
	if c.Empty() {
		return a
	}
	b := *a
	b.health = c
	return &b
}

// ObjectStatus is an object's kstatus status.
type ObjectStatus struct {
	Object ObjectRef `json:"object"`
	// Status is kstatus': InProgress, Failed, Terminating, NotFound, Unknown (or Current).
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// Unreadable is set when the object could not be read at all (the API server failed or
	// was unreachable): its status says nothing about the object.
	Unreadable bool `json:"unreadable,omitempty"`
}

func (s ObjectStatus) String() string {
	if s.Message == "" {
		return fmt.Sprintf("%s: %s", s.Object, s.Status)
	}
	return fmt.Sprintf("%s: %s: %s", s.Object, s.Status, s.Message)
}

// NotReadyError: objects did not become ready. Objects lists each one that was not, with the
// status it had when the wait ended, failed ones first.
type NotReadyError struct {
	Objects []ObjectStatus
	// Timeout is set when the wait ran out of time; zero when it stopped early because an
	// object failed (kstatus Failed: it would not have become ready by waiting longer).
	Timeout time.Duration
}

// Unreadable reports whether no object could be read when the wait ended: the cluster, not the
// objects, is what failed.
func (e *NotReadyError) Unreadable() bool {
	for _, s := range e.Objects {
		if !s.Unreadable {
			return false
		}
	}
	return len(e.Objects) > 0
}

func (e *NotReadyError) Error() string {
	items := make([]string, len(e.Objects))
	for i, s := range e.Objects {
		items[i] = s.String()
	}
	if e.Unreadable() {
		return fmt.Sprintf("the cluster did not answer (objects unreadable after %s): %s", e.Timeout, strings.Join(items, "; "))
	}
	if e.Timeout > 0 {
		return fmt.Sprintf("not ready after %s: %s", e.Timeout, strings.Join(items, "; "))
	}
	return "not ready, failed: " + strings.Join(items, "; ")
}

// forever stands for "no timeout": ssa's wait needs one.
const forever = 100 * 365 * 24 * time.Hour

// Wait waits until every object in objs is ready by kstatus (status Current), reading them
// soon after the apply and then less and less often, up to every Options.PollInterval (see
// poll). It returns:
//   - nil when all are ready;
//   - a *NotReadyError as soon as an object fails (kstatus Failed, e.g. a Deployment past its
//     progressDeadlineSeconds), or when timeout passes (timeout <= 0: no timeout of its own);
//   - a *NotReadyError too when ctx's deadline passes first (the caller's timeout), so that the
//     reason keeps which objects were not ready and why;
//   - an error wrapping ctx.Err() when ctx is cancelled first: an interruption, which says
//     nothing about the objects.
func (a *Applier) Wait(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	return a.wait(ctx, objs, timeout)
}

// notReadyReadTimeout bounds the read, after a wait's deadline passed, of why its objects are
// not ready: one read of each object, as a poll makes.
const notReadyReadTimeout = 30 * time.Second

func (a *Applier) wait(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	set := object.UnstructuredSetToObjMetadataSet(objs)
	if len(set) == 0 {
		return nil
	}
	if timeout <= 0 {
		timeout = forever
	}
	jobsWithTTL := utils.ExtractJobsWithTTL(objs)
	start := clock.System{}.Now()
	err := a.poll(ctx, objs, jobsWithTTL, start, timeout)
	if err == nil {
		return nil
	}
	deadline := errors.Is(context.Cause(ctx), context.DeadlineExceeded)
	if ctx.Err() != nil && !deadline {
		return fmt.Errorf("wait for %d objects to be ready: %w", len(set), ctx.Err())
	}
	waited := clock.System{}.Now().Sub(start)
	// ssa's error names objects and statuses but not why; read them once more for that.
	// Outlives ctx's deadline (a cancelled ctx returned above): the timeout's report says why.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notReadyReadTimeout)
	defer cancel()
	statuses := a.notReady(readCtx, objs, jobsWithTTL)
	if len(statuses) == 0 {
		return fmt.Errorf("wait for %d objects to be ready: %w", len(set), err)
	}
	nre := &NotReadyError{Objects: statuses}
	switch {
	case deadline:
		nre.Timeout = waited.Round(time.Second)
	case waited >= timeout:
		nre.Timeout = timeout
	}
	return nre
}

// firstPoll is the wait's first pause. A healthy cluster makes most objects ready within a
// second of their apply (kubectl wait, which watches, sees it at once); a fixed PollInterval
// (2 s) made every verification wait that long at least, on small fleets most of an apply.
const firstPoll = 100 * time.Millisecond

// poll reads objs until each is ready (nil), one has failed, the timeout passes or ctx ends
// (an error; the caller reads the objects once more for the reason). The pause between reads
// starts at firstPoll and grows by half each time up to PollInterval, so a long wait reads no more often than a
// fixed interval would. Each read after the first asks only for the objects that were not
// ready, and once none is left every object is read again, so that success means all were
// ready at once, as kstatus' aggregate would have it. Each object is judged as notReady does:
// by its health expressions or by kstatus.
func (a *Applier) poll(ctx context.Context, objs []*unstructured.Unstructured, jobsWithTTL object.ObjMetadataSet, start time.Time, timeout time.Duration) error {
	pending := objs
	pause := min(firstPoll, a.opts.PollInterval)
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var changed <-chan struct{}
	for {
		statuses := a.notReady(ctx, pending, jobsWithTTL)
		if len(statuses) > 0 && statuses[0].Status == string(status.FailedStatus) {
			return errors.New("objects failed")
		}
		switch {
		case len(statuses) == 0 && len(pending) == len(objs):
			return nil
		case len(statuses) == 0:
			pending = objs // the last of them became ready: confirm with every object
			continue
		}
		pending = objectsNamed(objs, statuses)
		if ctx.Err() != nil || (clock.System{}).Now().Sub(start) >= timeout {
			return errors.New("objects not ready")
		}
		if changed == nil {
			changed = a.watchChanges(watchCtx, pending)
		}
		if err := sleepOrWake(ctx, pause, changed); err != nil {
			return err
		}
		pause = min(pause*3/2, a.opts.PollInterval)
	}
}

// sleepOrWake pauses for d, or less when changed signals, but never less than firstPoll, so
// that a busy kind's changes cannot make the reads more frequent than that.
func sleepOrWake(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	if err := clock.Sleep(ctx, min(d, firstPoll)); err != nil {
		return err
	}
	if d <= firstPoll {
		return nil
	}
	t := time.NewTimer(d - firstPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-changed:
	}
	return nil
}

// watchChanges watches, until ctx ends, the kinds of objs in their namespaces (one watch of
// metadata per kind and namespace) and signals on the channel it returns at any change, so that
// a wait reads again as soon as an object may have become ready rather than at its next pause:
// kubectl wait, which watches, saw a small fleet's Deployments ready half a second before the
// polling did. A watch that cannot start (no `watch` permission) or that ends is given up; the
// pauses between reads stay as they were. Without a client that watches, it returns nil (a
// channel that never signals).
func (a *Applier) watchChanges(ctx context.Context, objs []*unstructured.Unstructured) <-chan struct{} {
	if a.unvetted == nil {
		return nil
	}
	type place struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	seen := map[place]bool{}
	changed := make(chan struct{}, 1)
	for _, obj := range objs {
		p := place{obj.GroupVersionKind(), obj.GetNamespace()}
		if seen[p] {
			continue
		}
		seen[p] = true
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(p.gvk.GroupVersion().WithKind(p.gvk.Kind + "List"))
		var opts []client.ListOption
		if p.namespace != "" {
			opts = append(opts, client.InNamespace(p.namespace))
		}
		go func() {
			w, err := a.unvetted.Watch(ctx, list, opts...)
			if err != nil {
				return
			}
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case _, open := <-w.ResultChan():
					if !open {
						return
					}
					select {
					case changed <- struct{}{}:
					default: // a read is due already
					}
				}
			}
		}()
	}
	return changed
}

// objectsNamed is the objects of objs that statuses name, in objs' order.
func objectsNamed(objs []*unstructured.Unstructured, statuses []ObjectStatus) []*unstructured.Unstructured {
	named := make(map[ObjectRef]bool, len(statuses))
	for _, s := range statuses {
		named[s.Object] = true
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if named[RefOf(obj)] {
			out = append(out, obj)
		}
	}
	return out
}

// listAtLeast is how many objects of one kind in one namespace a readiness check reads with
// one list instead of one read each, and listPage the most objects such a list may return: a
// namespace holding more of the kind than that is read object by object, where a list would
// cost the API server more than it saves.
const (
	listAtLeast = 3
	listPage    = 250
)

// notReady reads objs and returns the status of each that is not Current, failed first. The
// objects of one kind in one namespace, when there are at least listAtLeast, are read with one
// list (a bundle's 9 ConfigMaps cost one request, not nine); a list that fails (a missing RBAC
// rule), or finds the namespace holds more than listPage of the kind, leaves its objects to be
// read one by one. The lists and the reads of the objects no list covers go out together, up
// to Options.Concurrency at a time (and as many again for the reads of a failed list's
// objects): a wait reads every object at least twice (the first read, and the one that confirms
// all are ready at once), and one request at a time was slower than kwok at making the pods
// ready.
func (a *Applier) notReady(ctx context.Context, objs []*unstructured.Unstructured, jobsWithTTL object.ObjMetadataSet) []ObjectStatus {
	found := make([]*ObjectStatus, len(objs))
	limit := max(a.opts.Concurrency, 1) // an Applier not made by New may leave it 0

	var reads, fallback errgroup.Group // fallback: the reads of a list that failed
	reads.SetLimit(limit)
	fallback.SetLimit(limit)
	read := func(i int) {
		obj := objs[i]
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		if apierrors.IsNotFound(err) {
			live = nil
		}
		found[i] = a.judge(ctx, obj, live, err, jobsWithTTL)
	}
	// The lists and the reads of the objects no list covers go out together; a list that fails
	// reads its objects one by one in its turn.
	groups := a.listGroups(objs)
	listed := make([]bool, len(objs))
	for _, group := range groups {
		for _, i := range group {
			listed[i] = true
		}
	}
	for _, group := range groups {
		reads.Go(func() error {
			live, ok := a.list(ctx, objs[group[0]])
			for _, i := range group {
				if ok {
					found[i] = a.judge(ctx, objs[i], live[objs[i].GetName()], nil, jobsWithTTL)
				} else {
					fallback.Go(func() error { read(i); return nil })
				}
			}
			return nil
		})
	}
	for i := range objs {
		if !listed[i] {
			reads.Go(func() error { read(i); return nil })
		}
	}
	_ = reads.Wait()
	_ = fallback.Wait() // judge reports every failure in its status

	var out []ObjectStatus
	for _, s := range found {
		if s != nil {
			out = append(out, *s)
		}
	}
	slices.SortStableFunc(out, func(x, y ObjectStatus) int {
		return cmp.Compare(rankStatus(x.Status), rankStatus(y.Status))
	})
	return out
}

// listGroups is the indexes in objs of the objects read by one list: at least listAtLeast of
// one namespaced kind (as the cluster maps it) in one namespace.
func (a *Applier) listGroups(objs []*unstructured.Unstructured) [][]int {
	type place struct {
		gvk       schema.GroupVersionKind
		namespace string
	}
	byPlace := map[place][]int{}
	var order []place
	for i, obj := range objs {
		if !a.namespaced(obj) {
			continue
		}
		p := place{obj.GroupVersionKind(), obj.GetNamespace()}
		if _, seen := byPlace[p]; !seen {
			order = append(order, p)
		}
		byPlace[p] = append(byPlace[p], i)
	}
	var out [][]int
	for _, p := range order {
		if len(byPlace[p]) >= listAtLeast {
			out = append(out, byPlace[p])
		}
	}
	return out
}

// list lists the objects of like's kind in like's namespace, by name; ok is false when the list
// failed or the namespace holds more than listPage of them.
func (a *Applier) list(ctx context.Context, like *unstructured.Unstructured) (map[string]*unstructured.Unstructured, bool) {
	gvk := like.GroupVersionKind()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := a.client.List(ctx, list, client.InNamespace(like.GetNamespace()), client.Limit(listPage)); err != nil || list.GetContinue() != "" {
		return nil, false
	}
	byName := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		item := &list.Items[i]
		item.SetGroupVersionKind(gvk) // a list's items may come without apiVersion and kind
		byName[item.GetName()] = item
	}
	return byName, true
}

// judge is obj's status from its read: live (nil when not found) or err. It is nil when obj is
// Current, or is a Job with a TTL that is gone (it did its work and was cleaned up).
func (a *Applier) judge(ctx context.Context, obj, live *unstructured.Unstructured, err error, jobsWithTTL object.ObjMetadataSet) *ObjectStatus {
	ref := RefOf(obj)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return &ObjectStatus{Object: ref, Status: string(status.UnknownStatus), Message: err.Error(), Unreadable: true}
	case live == nil:
		if jobsWithTTL.Contains(object.UnstructuredToObjMetadata(obj)) {
			return nil
		}
		return &ObjectStatus{Object: ref, Status: string(status.NotFoundStatus), Message: "object not found"}
	}
	if s := a.statusOf(ctx, live); s.Status != string(status.CurrentStatus) {
		return &s
	}
	return nil
}

func rankStatus(s string) int {
	if s == string(status.FailedStatus) {
		return 0
	}
	return 1
}

// statusOf judges live by its health expressions when there are some for its kind, by kstatus
// otherwise.
func (a *Applier) statusOf(ctx context.Context, live *unstructured.Unstructured) ObjectStatus {
	if v, ok := a.health.Judge(ctx, live.Object); ok {
		return ObjectStatus{Object: RefOf(live), Status: v.Status, Message: v.Message}
	}
	return statusOf(live)
}

// statusOf computes live's kstatus status. For a failed object the message is the reason and
// message of its Stalled condition, e.g. "ProgressDeadlineExceeded: ReplicaSet "web-5d8" has
// timed out progressing.", which says more than kstatus' summary.
func statusOf(live *unstructured.Unstructured) ObjectStatus {
	s := ObjectStatus{Object: RefOf(live)}
	res, err := status.Compute(live)
	if err != nil {
		s.Status, s.Message = string(status.UnknownStatus), err.Error()
		return s
	}
	s.Status, s.Message = string(res.Status), res.Message
	if res.Status == status.FailedStatus {
		for _, c := range res.Conditions {
			if c.Type == status.ConditionStalled && (c.Reason != "" || c.Message != "") {
				s.Message = strings.Trim(c.Reason+": "+c.Message, ": ")
				break
			}
		}
	}
	return s
}
