package fluxdelivery

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Statuses keeps the statuses of a rollout's Kustomizations in one namespace current from one
// list and watch, for a run's verifications to read: a wave's clusters waiting on Flux then
// cost the management cluster one watch, not a read of each Kustomization every few seconds
// (those reads were a quarter of the provider's CPU in a wave of 64, and grow with the time a
// wave waits for Flux). A watch that ends on its own (the server's timeout, or the client's
// RequestTimeout cutting it) resumes from the last resource version it saw, without a list; it
// lists again only when the server no longer has that version, after a failure, or when the run
// narrows it to the batch it is changing (Focus).
//
// While the watch is not established (before its first list, or after it broke, until it is
// listed again) Status says so, and the caller reads the Kustomization itself: the watch is
// how to read cheaply, never a reason to read nothing. A watch refused for good (no `watch`
// permission) leaves every read to the caller.
type Statuses struct {
	d         *Delivery
	c         client.WithWatch // reads Kustomizations as kustomizationView (NewStatusClient)
	namespace string
	retry     time.Duration // wait before listing again after a failure

	mu     sync.Mutex
	synced bool
	status map[string]Status
	// focus, when not nil, is the clusters the watch follows (see Focus), by name, and
	// focusLabels their LabelCluster values, which select them; nil follows the whole rollout.
	focus       map[string]bool
	focusLabels []string
	// restart ends the list or watch in progress, so that the next one selects the new focus.
	restart context.CancelFunc
	// changed holds a channel per cluster waited on, closed (and forgotten) at its cluster's next
	// change, or at any change of the watch's state: a waiter wakes for its own cluster only.
	changed map[string]chan struct{}
}

// WatchStatuses starts watching the rollout's Kustomizations in namespace until ctx ends, with
// c, a client made by NewStatusClient.
func (d *Delivery) WatchStatuses(ctx context.Context, c client.WithWatch, namespace string) *Statuses {
	s := &Statuses{d: d, c: c, namespace: namespace, retry: time.Second, changed: map[string]chan struct{}{}}
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

// maxFocus is the most clusters Focus selects by name: a label selector naming each one goes
// in the watch's URL (up to 63 characters a name), and a batch larger than this is followed
// with the whole rollout's watch instead.
const maxFocus = 100

// Focus narrows the watch to clusters, the batch the run is changing now (nil or more than
// maxFocus: every Kustomization of the rollout). kustomize-controller writes a Kustomization's
// status several times each time it reconciles it, and re-reconciles every one on its interval,
// so a watch of the whole rollout handed this process every status write of the fleet while it
// waited on one wave: decoding them was a quarter of the provider's CPU in a run of 1,000
// clusters through Flux. The watch lists and watches again with the new selector; meanwhile,
// and for any cluster outside the focus, Status says nothing of it and the caller reads.
func (s *Statuses) Focus(clusters []string) {
	var focus map[string]bool
	var values []string
	if len(clusters) > 0 && len(clusters) <= maxFocus {
		focus = make(map[string]bool, len(clusters))
		for _, c := range clusters {
			focus[c] = true
			values = append(values, readable(c, 63))
		}
		slices.Sort(values)
		values = slices.Compact(values)
	}
	s.mu.Lock()
	if maps.Equal(focus, s.focus) {
		s.mu.Unlock()
		return
	}
	s.focus, s.focusLabels = focus, values
	restart := s.restart
	s.mu.Unlock()
	if restart != nil {
		restart()
	}
}

// followed says whether the watch follows cluster; with mu held.
func (s *Statuses) followed(cluster string) bool { return s.focus == nil || s.focus[cluster] }

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

// run lists and watches until ctx ends.
func (s *Statuses) run(ctx context.Context) {
	backoff := s.retry
	rv := "" // where the next watch starts; "" lists first
	for ctx.Err() == nil {
		// Each list and watch runs under its own context, which Focus ends for a new selector.
		iter, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.restart = cancel
		s.mu.Unlock()
		var err error
		if rv == "" {
			rv, err = s.list(iter)
		}
		if err == nil {
			rv, err = s.follow(iter, rv)
		}
		refocused := iter.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case refocused:
			rv, backoff = "", s.retry // another selection: list it, at once
			continue
		case err == nil:
			backoff = s.retry // the watch ended (the server's or the client's timeout): watch on at once
			continue
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			rv = "" // the server no longer has changes since rv: list again, at once
			continue
		}
		// Any other failure lists again after a pause: the statuses are stale meanwhile, and the
		// callers read for themselves.
		rv = ""
		s.unsync()
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

// list reads the rollout's Kustomizations into the statuses, and returns the list's resource
// version, where the watch starts.
func (s *Statuses) list(ctx context.Context) (string, error) {
	s.unsync()
	status := map[string]Status{}
	rv, cont := "", ""
	for {
		list := &kustomizationViewList{}
		opts := s.options()
		opts.Limit, opts.Continue = listPage, cont
		if err := s.c.List(ctx, list, opts); err != nil {
			return "", err
		}
		s.mu.Lock()
		for i := range list.Items {
			if cluster, ok := s.clusterOf(&list.Items[i]); ok && s.followed(cluster) {
				status[cluster] = list.Items[i].status()
			}
		}
		s.mu.Unlock()
		rv = list.ResourceVersion
		if cont = list.Continue; cont == "" {
			break
		}
	}
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
	return rv, nil
}

// follow watches the Kustomizations' changes from resource version rv until the watch ends,
// and returns the last resource version it saw, from which the next watch resumes: a watch
// ends every RequestTimeout (the client's timeout cuts it), and listing a fleet's
// Kustomizations again each time cost a wave of 1,000 clusters waiting on Flux a read of
// every one every 30 s (a fifth of the provider's CPU). The error is nil when the watch ended
// on its own; a resource version the server no longer has is an expired error (list again).
func (s *Statuses) follow(ctx context.Context, rv string) (string, error) {
	opts := s.options()
	opts.Raw = &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
	w, err := s.c.Watch(ctx, &kustomizationViewList{}, opts)
	if err != nil {
		return rv, err
	}
	defer w.Stop()
	s.mu.Lock()
	if !s.synced {
		s.synced = true
		s.notify("")
	}
	s.mu.Unlock()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case e, open := <-w.ResultChan():
			if !open {
				return rv, nil
			}
			ev = e
		}
		if ev.Type == watch.Error {
			// Most often 410 Gone (rv is too old): the caller lists again.
			return rv, watchError(ev.Object)
		}
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
			rv = m.GetResourceVersion()
		}
		if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
			continue // a bookmark: only its resource version counts
		}
		ks, ok := ev.Object.(*kustomizationView)
		if !ok {
			continue
		}
		cluster, ok := s.clusterOf(ks)
		if !ok {
			continue
		}
		s.mu.Lock()
		if !s.followed(cluster) { // a cluster whose label is cut like a followed one's
			s.mu.Unlock()
			continue
		}
		if ev.Type == watch.Deleted {
			delete(s.status, cluster)
		} else {
			s.status[cluster] = ks.status()
		}
		s.notify(cluster)
		s.mu.Unlock()
	}
}

// options select the rollout's Kustomizations in the namespace, of the clusters in focus.
func (s *Statuses) options() *client.ListOptions {
	sel := labels.SelectorFromSet(labels.Set{records.LabelManagedBy: records.ManagedBy, records.LabelRollout: s.d.key.Hash()})
	s.mu.Lock()
	values := s.focusLabels
	s.mu.Unlock()
	if len(values) > 0 {
		// The values are readable's, valid label values: NewRequirement cannot refuse them.
		if in, err := labels.NewRequirement(LabelCluster, selection.In, values); err == nil {
			sel = sel.Add(*in)
		}
	}
	return &client.ListOptions{Namespace: s.namespace, LabelSelector: sel}
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

// clusterOf is the cluster ks is the Kustomization of, when it is the rollout's (as ReadAll).
func (s *Statuses) clusterOf(ks *kustomizationView) (string, bool) {
	cluster := ks.Annotations[annotationClusterName]
	return cluster, cluster != "" && ks.Name == ObjectName(s.d.key, cluster)
}

// watchError is the error of a watch's error event: the API status it carries, so that an
// expired resource version reads as one.
func watchError(obj runtime.Object) error {
	return fmt.Errorf("watch: %w", apierrors.FromObject(obj))
}
