package fluxdelivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

var watchKey = records.Key{Kind: records.KindRollout, Namespace: "fleet", Name: "web"}

// kustomizationOf is the rollout's Kustomization of cluster, Ready as ready says ("" for no
// condition).
func kustomizationOf(cluster, ready string) *kustomizationView {
	d := &Delivery{key: watchKey}
	u := d.object(KustomizationKind, "fleet", cluster)
	ks := &kustomizationView{TypeMeta: metav1.TypeMeta{APIVersion: KustomizationKind.GroupVersion().String(), Kind: KustomizationKind.Kind}}
	ks.Namespace, ks.Name, ks.Labels, ks.Annotations = u.GetNamespace(), u.GetName(), u.GetLabels(), u.GetAnnotations()
	if ready != "" {
		ks.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionStatus(ready), Reason: "Test"}}
	}
	return ks
}

func fakeClient(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(StatusScheme()).WithObjects(objs...).Build()
}

// waitFor fails the test unless cond holds within 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
	}
}

// nextWatch is the next watch a test's client started and what it noted of it (its resource
// version, its selector), failing the test unless one starts within 5 s.
func nextWatch(t *testing.T, what string, watchers <-chan *watch.FakeWatcher, noted <-chan string) (*watch.FakeWatcher, string) {
	t.Helper()
	select {
	case w := <-watchers:
		return w, <-noted
	case <-time.After(5 * time.Second):
		t.Fatalf("no watch within 5 s: %s", what)
		return nil, ""
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestStatusesFollowTheKustomizations: the watch gives each cluster's status as it changes,
// wakes the waiters of that cluster only, sees Kustomizations come and go, and leaves out an
// object with the rollout's label that is not its Kustomization of the cluster it names.
func TestStatusesFollowTheKustomizations(t *testing.T) {
	impostor := kustomizationOf("c2", "True")
	impostor.SetName("copy-of-c2")
	c := fakeClient(kustomizationOf("c1", "Unknown"), impostor)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := (&Delivery{key: watchKey}).WatchStatuses(ctx, c, "fleet")
	waitFor(t, "the first list", func() bool { _, _, ok := s.Status("c1"); return ok })

	st, c1Changed, _ := s.Status("c1")
	if !st.Exists || st.Ready != "Unknown" {
		t.Fatalf("c1: %+v, want the listed Kustomization, not ready", st)
	}
	st, c2Changed, _ := s.Status("c2")
	if st.Exists {
		t.Fatalf("c2: %+v; the impostor was taken for its Kustomization", st)
	}

	live := &kustomizationView{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: ObjectName(watchKey, "c1")}, live); err != nil {
		t.Fatal(err)
	}
	live.Status.Conditions = kustomizationOf("c1", "True").Status.Conditions
	if err := c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c1's waiters woken", func() bool { return closed(c1Changed) })
	if closed(c2Changed) {
		t.Fatal("a change of c1 woke the waiters of c2")
	}
	if st, _, _ := s.Status("c1"); st.Ready != "True" {
		t.Fatalf("c1 after its change: %+v", st)
	}

	if err := c.Create(ctx, kustomizationOf("c2", "False")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c2's waiters woken", func() bool { return closed(c2Changed) })
	if st, _, _ := s.Status("c2"); !st.Exists || st.Ready != "False" {
		t.Fatalf("c2 after it was created: %+v", st)
	}

	if err := c.Delete(ctx, kustomizationOf("c1", "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c1 deleted", func() bool { st, _, _ := s.Status("c1"); return !st.Exists })

	cancel()
	waitFor(t, "the watch stopped", func() bool { _, _, ok := s.Status("c1"); return !ok })
}

// TestStatusesWithoutWatchPermission: a watch the API server refuses leaves the statuses
// unestablished, so that every verification reads for itself instead of trusting nothing.
func TestStatusesWithoutWatchPermission(t *testing.T) {
	c := interceptor.NewClient(fakeClient(kustomizationOf("c1", "True")), interceptor.Funcs{
		Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
			return nil, apierrors.NewForbidden(schema.GroupResource{Group: KustomizationKind.Group, Resource: "kustomizations"}, "", errors.New("RBAC: no watch"))
		},
	})
	s := (&Delivery{key: watchKey}).WatchStatuses(t.Context(), c, "fleet")
	for range 20 {
		if _, _, ok := s.Status("c1"); ok {
			t.Fatal("statuses established although the watch was refused")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatusesResumeWithoutListing: a watch that ends on its own (the client's timeout cuts
// one every RequestTimeout) resumes from the last resource version it saw, bookmarks
// included, without listing every Kustomization again; a resource version the server no
// longer has (410 Gone) lists again, and the watch after that starts from the new list.
func TestStatusesResumeWithoutListing(t *testing.T) {
	watchers := make(chan *watch.FakeWatcher, 10)
	from := make(chan string, 10) // each watch's resource version
	var mu sync.Mutex
	listed := 0
	c := interceptor.NewClient(fakeClient(kustomizationOf("c1", "Unknown")), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			mu.Lock()
			listed++
			mu.Unlock()
			return c.List(ctx, list, opts...)
		},
		Watch: func(_ context.Context, _ client.WithWatch, _ client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			w := watch.NewFakeWithChanSize(10, false)
			from <- (&client.ListOptions{}).ApplyOptions(opts).AsListOptions().ResourceVersion
			watchers <- w
			return w, nil
		},
	})
	lists := func() int {
		mu.Lock()
		defer mu.Unlock()
		return listed
	}
	next := func(what string) (*watch.FakeWatcher, string) { t.Helper(); return nextWatch(t, what, watchers, from) }
	s := (&Delivery{key: watchKey}).WatchStatuses(t.Context(), c, "fleet")
	w, _ := next("the first")
	waitFor(t, "the first list", func() bool { _, _, ok := s.Status("c1"); return ok })

	ready := kustomizationOf("c1", "True")
	ready.ResourceVersion = "41"
	w.Modify(ready)
	bookmark := &kustomizationView{}
	bookmark.ResourceVersion = "42"
	w.Action(watch.Bookmark, bookmark)
	w.Stop() // the watch ends on its own

	w, rv := next("after the watch ended")
	if rv != "42" {
		t.Fatalf("the watch resumed from resource version %q, want the bookmark's 42", rv)
	}
	if n := lists(); n != 1 {
		t.Fatalf("%d lists; a watch that ended on its own listed the Kustomizations again", n)
	}
	if st, _, ok := s.Status("c1"); !ok || st.Ready != "True" {
		t.Fatalf("c1 after the resume: %+v (established %v), want the watched change kept", st, ok)
	}

	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 42"})
	_, rv = next("after 410 Gone")
	if n := lists(); n != 2 {
		t.Fatalf("%d lists after 410 Gone, want 2: the watch must list again", n)
	}
	if rv == "42" {
		t.Fatal("after 410 Gone the watch started again from the expired resource version")
	}
}

// TestStatusesFocus: narrowed to a batch, the watch lists and watches again selecting that
// batch's clusters by label, follows their changes, and says nothing of a cluster outside it
// (its change is neither kept nor wakes anyone; the caller reads it), even one the server sends
// anyway; a batch larger than maxFocus, or none, follows the whole rollout again.
func TestStatusesFocus(t *testing.T) {
	watchers := make(chan *watch.FakeWatcher, 10)
	selectors := make(chan string, 10) // each watch's label selector
	var mu sync.Mutex
	var listSelectors []string
	c := interceptor.NewClient(fakeClient(kustomizationOf("c1", "Unknown"), kustomizationOf("c2", "Unknown"), kustomizationOf("c3", "Unknown")), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			mu.Lock()
			listSelectors = append(listSelectors, (&client.ListOptions{}).ApplyOptions(opts).LabelSelector.String())
			mu.Unlock()
			return c.List(ctx, list, opts...)
		},
		Watch: func(_ context.Context, _ client.WithWatch, _ client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			w := watch.NewFakeWithChanSize(10, false)
			selectors <- (&client.ListOptions{}).ApplyOptions(opts).LabelSelector.String()
			watchers <- w
			return w, nil
		},
	})
	next := func(what string) (*watch.FakeWatcher, string) {
		t.Helper()
		return nextWatch(t, what, watchers, selectors)
	}
	lastList := func() string {
		mu.Lock()
		defer mu.Unlock()
		return listSelectors[len(listSelectors)-1]
	}
	s := (&Delivery{key: watchKey}).WatchStatuses(t.Context(), c, "fleet")
	_, sel := next("the first")
	if strings.Contains(sel, LabelCluster) {
		t.Fatalf("before any batch the watch selects %q, want the whole rollout", sel)
	}
	waitFor(t, "the first list", func() bool { st, _, ok := s.Status("c3"); return ok && st.Exists })

	s.Focus([]string{"c2", "c1"})
	w, sel := next("after Focus")
	want := LabelCluster + " in (c1,c2)"
	if !strings.Contains(sel, want) || !strings.Contains(lastList(), want) {
		t.Fatalf("focused on c1 and c2, the watch selects %q and the list %q; want %q in both", sel, lastList(), want)
	}
	waitFor(t, "the focused list", func() bool { st, _, ok := s.Status("c1"); return ok && st.Exists })
	if st, _, _ := s.Status("c3"); st.Exists {
		t.Fatalf("c3, outside the batch, still has a status from the watch: %+v", st)
	}
	_, c1Changed, _ := s.Status("c1")
	_, c3Changed, _ := s.Status("c3")
	w.Modify(kustomizationOf("c3", "True")) // sent although not selected
	w.Modify(kustomizationOf("c1", "True"))
	waitFor(t, "c1's change", func() bool { return closed(c1Changed) })
	if st, _, _ := s.Status("c1"); st.Ready != "True" {
		t.Fatalf("c1 in the batch after its change: %+v", st)
	}
	if st, _, _ := s.Status("c3"); st.Exists || closed(c3Changed) {
		t.Fatalf("a change of c3, outside the batch, was kept (%+v) or woke its waiters (%v)", st, closed(c3Changed))
	}

	s.Focus([]string{"c1", "c2"}) // the same batch: nothing to do
	select {
	case <-watchers:
		t.Fatal("the same focus again restarted the watch")
	case <-time.After(50 * time.Millisecond):
	}

	many := make([]string, maxFocus+1)
	for i := range many {
		many[i] = fmt.Sprintf("c%d", i+1)
	}
	s.Focus(many)
	if _, sel = next("a batch over maxFocus"); strings.Contains(sel, LabelCluster) {
		t.Fatalf("a batch of %d clusters selects %q, want the whole rollout", len(many), sel)
	}
	waitFor(t, "the whole rollout listed", func() bool { st, _, ok := s.Status("c3"); return ok && st.Exists })
}

// TestStatusesFocusWhileTheServerFails: narrowed while the management cluster refuses the list,
// the statuses are not established (each caller reads for itself, and meets the same failure)
// rather than kept from before the focus; once the server answers, the watch lists the batch
// and follows it.
func TestStatusesFocusWhileTheServerFails(t *testing.T) {
	var failing atomic.Bool
	c := interceptor.NewClient(fakeClient(kustomizationOf("c1", "True"), kustomizationOf("c2", "True")), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if failing.Load() {
				return apierrors.NewServiceUnavailable("the management cluster is restarting")
			}
			return c.List(ctx, list, opts...)
		},
	})
	s := (&Delivery{key: watchKey}).WatchStatuses(t.Context(), c, "fleet")
	waitFor(t, "the first list", func() bool { st, _, ok := s.Status("c2"); return ok && st.Exists })

	failing.Store(true)
	s.Focus([]string{"c1"})
	waitFor(t, "the statuses given up while the list fails", func() bool { _, _, ok := s.Status("c1"); return !ok })
	time.Sleep(50 * time.Millisecond)
	if _, _, ok := s.Status("c1"); ok {
		t.Fatal("the statuses were established again while every list failed")
	}

	failing.Store(false)
	waitFor(t, "the batch listed once the server answers", func() bool { st, _, ok := s.Status("c1"); return ok && st.Exists && st.Ready == "True" })
	if st, _, _ := s.Status("c2"); st.Exists {
		t.Fatalf("c2, outside the batch, has a status after the focused list: %+v", st)
	}
}
