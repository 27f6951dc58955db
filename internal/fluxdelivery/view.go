package fluxdelivery

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kustomizationView is the part of a Kustomization that Status is made of. The run's watch
// decodes every status write of kustomize-controller, and decoding each whole (its spec, its
// inventory of every object it applied) into maps was the largest CPU cost of a Flux run at
// 1,000 clusters; decoded into this type, the JSON decoder skips the rest.
type kustomizationView struct {
	metav1.TypeMeta `json:",inline"`
	viewMeta        `json:"metadata,omitempty"`
	Spec            struct {
		Suspend   bool `json:"suspend,omitempty"`
		SourceRef struct {
			Name string `json:"name,omitempty"`
		} `json:"sourceRef"`
	} `json:"spec"`
	Status struct {
		LastAppliedRevision    string             `json:"lastAppliedRevision,omitempty"`
		LastAttemptedRevision  string             `json:"lastAttemptedRevision,omitempty"`
		LastHandledReconcileAt string             `json:"lastHandledReconcileAt,omitempty"`
		Conditions             []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status"`
}

// viewMeta is a Kustomization's metadata without its managed fields: a third of each event's
// bytes, which the view never reads. Its managedFields (shallower than ObjectMeta's) take the
// JSON key, and are skipped.
type viewMeta struct {
	metav1.ObjectMeta
	ManagedFields skipped `json:"managedFields,omitzero"`
}

// skipped is a JSON value read past, never kept (and never written).
type skipped struct{}

func (skipped) UnmarshalJSON([]byte) error   { return nil }
func (skipped) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func (k *kustomizationView) DeepCopyObject() runtime.Object {
	c := k.deepCopy()
	return &c
}

func (k *kustomizationView) deepCopy() kustomizationView {
	c := *k
	k.DeepCopyInto(&c.ObjectMeta) // ObjectMeta's
	c.Status.Conditions = make([]metav1.Condition, len(k.Status.Conditions))
	for i := range k.Status.Conditions {
		k.Status.Conditions[i].DeepCopyInto(&c.Status.Conditions[i])
	}
	return c
}

// status is what the Kustomization says, as statusOf.
func (k *kustomizationView) status() Status {
	st := Status{Exists: true, Ready: "Unknown", Applied: k.Status.LastAppliedRevision,
		Attempted: k.Status.LastAttemptedRevision, Handled: k.Status.LastHandledReconcileAt, Suspended: k.Spec.Suspend,
		Source: k.Spec.SourceRef.Name, Generation: k.Generation}
	for _, c := range k.Status.Conditions {
		if c.Type != "Ready" {
			continue
		}
		if c.ObservedGeneration != 0 && c.ObservedGeneration != k.Generation {
			break // about an older spec
		}
		st.Ready, st.Reason, st.Message = string(c.Status), c.Reason, c.Message
	}
	return st
}

type kustomizationViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []kustomizationView `json:"items"`
}

func (l *kustomizationViewList) DeepCopyObject() runtime.Object {
	c := *l
	l.DeepCopyInto(&c.ListMeta) // ListMeta's
	c.Items = make([]kustomizationView, len(l.Items))
	for i := range l.Items {
		c.Items[i] = l.Items[i].deepCopy()
	}
	return &c
}

// StatusScheme knows Kustomizations as the part of them the run's watch reads: the scheme of
// NewStatusClient, for fake clients in tests.
func StatusScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	gv := KustomizationKind.GroupVersion()
	s.AddKnownTypeWithName(KustomizationKind, &kustomizationView{})
	s.AddKnownTypeWithName(gv.WithKind(KustomizationKind.Kind+"List"), &kustomizationViewList{})
	metav1.AddToGroupVersion(s, gv)
	return s
}

// NewStatusClient is a client of the management cluster cfg reaches for the run's watch of
// Kustomizations (WatchStatuses): it reads them as kustomizationView. It makes no request.
func NewStatusClient(cfg *rest.Config) (client.WithWatch, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: StatusScheme()})
	if err != nil {
		return nil, fmt.Errorf("client for the Kustomizations' watch: %w", err)
	}
	return c, nil
}
