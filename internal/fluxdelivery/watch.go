package fluxdelivery

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// kustomizations is the resource of KustomizationKind, for the dynamic client.
var kustomizations = KustomizationKind.GroupVersion().WithResource("kustomizations")

// Statuses keeps the statuses of a rollout's Kustomizations in one namespace current from one
// list and watch, for a run's verifications to read: a wave's clusters waiting on Flux then
// cost the management cluster one watch, not a read of each Kustomization every few seconds
// (those reads were a quarter of the provider's CPU in a wave of 64, and grow with the time a
// wave waits for Flux).
//
// While the watch is not established (before its first list, or after it broke, until it is
// listed again) Status says so, and the caller reads the Kustomization itself: the watch is
// how to read cheaply, never a reason to read nothing. A watch refused for good (no `watch`
// permission) leaves every read to the caller.
type Statuses struct {
	d         *Delivery
	dyn       dynamic.Interface
	namespace string
	retry     time.Duration // wait before listing again after a failure

	mu     sync.Mutex
	synced bool
	status map[string]Status
	// changed holds a channel per cluster waited on, closed (and forgotten) at its cluster's next
	// change, or at any change of the watch's state: a waiter wakes for its own cluster only.
	changed map[string]chan struct{}
}

// WatchStatuses starts watching the rollout's Kustomizations in namespace until ctx ends.
func (d *Delivery) WatchStatuses(ctx context.Context, dyn dynamic.Interface, namespace string) *Statuses {
	s := &Statuses{d: d, dyn: dyn, namespace: namespace, retry: time.Second, changed: map[string]chan struct{}{}}
	go s.run(ctx)
	return s
}

// Status is cluster's Kustomization's status as last seen, a channel closed at its next change
// (or the watch's), and whether the watch is established; when it is not, the caller reads.
func (s *Statuses) Status(cluster string) (Status, <-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.changed[cluster]
	if ch == nil {
		ch = make(chan struct{})
		s.changed[cluster] = ch
	}
	return s.status[cluster], ch, s.synced
}

// notify wakes the waiters on cluster, or every waiter when cluster is ""; with mu held.
func (s *Statuses) notify(cluster string) {
	if cluster != "" {
		if ch, ok := s.changed[cluster]; ok {
			close(ch)
			delete(s.changed, cluster)
		}
		return
	}
	for _, ch := range s.changed {
		close(ch)
	}
	clear(s.changed)
}

func (s *Statuses) run(ctx context.Context) {
	backoff := s.retry
	for ctx.Err() == nil {
		if err := s.listAndWatch(ctx); err == nil {
			backoff = s.retry // the watch ended (the server's timeout): list again at once
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	s.mu.Lock()
	s.synced = false
	s.notify("")
	s.mu.Unlock()
}

// listAndWatch lists the Kustomizations, then follows their changes from the list's resource
// version until the watch ends; it returns the failure that ended it, nil when the server
// closed it.
func (s *Statuses) listAndWatch(ctx context.Context) error {
	selector := labels.SelectorFromSet(labels.Set{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: s.d.key.Hash()}).String()
	res := s.dyn.Resource(kustomizations).Namespace(s.namespace)
	status := map[string]Status{}
	rv, cont := "", ""
	for {
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: listPage, Continue: cont})
		if err != nil {
			s.unsync()
			return err
		}
		for i := range list.Items {
			if cluster, ok := s.clusterOf(&list.Items[i]); ok {
				status[cluster] = statusOf(&list.Items[i])
			}
		}
		rv = list.GetResourceVersion()
		if cont = list.GetContinue(); cont == "" {
			break
		}
	}
	w, err := res.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		s.unsync()
		return err
	}
	defer w.Stop()
	s.mu.Lock()
	s.status, s.synced = status, true
	s.notify("")
	s.mu.Unlock()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			s.unsync()
			return ctx.Err()
		case e, open := <-w.ResultChan():
			if !open {
				s.unsync()
				return nil // the server's timeout: list again
			}
			ev = e
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			cluster, ok := s.clusterOf(u)
			if !ok {
				continue
			}
			s.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(s.status, cluster)
			} else {
				s.status[cluster] = statusOf(u)
			}
			s.notify(cluster)
			s.mu.Unlock()
		case watch.Error:
			// Most often 410 Gone (the resource version is too old): list again.
			s.unsync()
			return watchError{ev.Object}
		}
	}
}

// unsync marks the statuses stale: readers read for themselves until the next list.
func (s *Statuses) unsync() {
	s.mu.Lock()
	if s.synced {
		s.synced = false
		s.notify("")
	}
	s.mu.Unlock()
}

// clusterOf is the cluster u is the Kustomization of, when it is the rollout's (as ReadAll).
func (s *Statuses) clusterOf(u *unstructured.Unstructured) (string, bool) {
	cluster := u.GetAnnotations()[annotationClusterName]
	return cluster, cluster != "" && u.GetName() == ObjectName(s.d.key, cluster)
}

// watchError is a watch's error event.
type watchError struct{ obj any }

func (e watchError) Error() string {
	if st, ok := e.obj.(*metav1.Status); ok {
		return "watch: " + st.Message
	}
	return "watch failed"
}
