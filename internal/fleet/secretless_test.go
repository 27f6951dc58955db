package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// secretWatch is a management cluster (a fake client) holding the Clusters in namespace fleet
// that counts every get and list of Secrets there and, when refuse is set, fails the test on
// one and answers Forbidden, as the API server would for credentials bound to the Flux role.
type secretWatch struct {
	reads  atomic.Int32
	refuse bool
}

func (w *secretWatch) client(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := Scheme()
	isSecret := func(obj runtime.Object) bool {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatalf("the type of %T: %v", obj, err)
		}
		return gvk.Group == "" && strings.TrimSuffix(gvk.Kind, "List") == "Secret"
	}
	read := func(what string) error {
		w.reads.Add(1)
		if !w.refuse {
			return nil
		}
		t.Errorf("%s of Secrets in the Clusters' namespace", what)
		return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if isSecret(obj) && key.Namespace == "fleet" {
				if err := read("get " + key.Name); err != nil {
					return err
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if isSecret(list) && (lo.Namespace == "fleet" || lo.Namespace == "") {
				if err := read("list"); err != nil {
					return err
				}
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
}

// secretlessFleet is a namespace fleet with Clusters: a (initialized, its kubeconfig Secret
// written), b (initialized, its Secret missing anyway) and c (control plane not initialized).
func secretlessFleet() []client.Object {
	a, b, c := readyV1Beta2(), readyV1Beta2(), readyV1Beta2()
	b.Name, c.Name = "b", "c"
	c.Status.Initialization.ControlPlaneInitialized = nil
	return []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}},
		a, b, c, kubeconfigSecret("a", "https://a.example:6443")}
}

// TestDiscoverWithoutSecrets: with Query.WithoutSecrets (delivery through Flux) the Clusters are
// judged by their status alone, no Secret in their namespace is read, and a Cluster whose
// control plane is initialized is eligible even when its Secret is missing (its Kustomization
// will say so); without it (direct), the Secrets are listed and a missing one skips the Cluster.
func TestDiscoverWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		withoutSecrets bool
		want           map[string]string // cluster -> skip reason ("" eligible)
	}{
		{"flux", true, map[string]string{"a": "", "b": "", "c": "control plane is not initialized"}},
		{"direct", false, map[string]string{"a": "", "b": `kubeconfig Secret fleet/b-kubeconfig (key "value") not found`, "c": "control plane is not initialized"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &secretWatch{refuse: tc.withoutSecrets}
			m := &Management{Client: w.client(t, secretlessFleet()...), apiVersion: clusterv1.GroupVersion.Version}
			d, err := m.Discover(ctx, Query{Namespace: "fleet", WithoutSecrets: tc.withoutSecrets})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, c := range d.Clusters {
				got[c.Name] = c.SkipReason
				if tc.withoutSecrets && c.KubeconfigAvailable {
					t.Errorf("%s: KubeconfigAvailable without looking", c.Name)
				}
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s: skip reason %q, want %q", name, got[name], want)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("clusters %v, want %v", got, tc.want)
			}
			if !tc.withoutSecrets && w.reads.Load() == 0 {
				t.Error("direct mode read no Secret: the watch sees nothing")
			}
		})
	}
}

// TestClusterGoneReasonReadsNoSecret: ClusterGoneReason judges by the Cluster alone (deleted,
// being deleted), where GoneReason also finds the kubeconfig Secret deleted.
func TestClusterGoneReasonReadsNoSecret(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	deleting := readyV1Beta2()
	deleting.Name, deleting.DeletionTimestamp, deleting.Finalizers = "d", &now, []string{"cluster.cluster.x-k8s.io"}
	objs := append(secretlessFleet(), deleting)

	w := &secretWatch{refuse: true}
	m := &Management{Client: w.client(t, objs...), apiVersion: clusterv1.GroupVersion.Version}
	for name, want := range map[string]string{
		"a": "", "b": "", // b's Secret is missing: not the Cluster's departure
		"d":    "Cluster fleet/d is being deleted",
		"gone": "Cluster fleet/gone was deleted",
	} {
		got, err := m.ClusterGoneReason(ctx, "fleet", name)
		if err != nil || got != want {
			t.Errorf("ClusterGoneReason(%s) = %q, %v; want %q", name, got, err, want)
		}
	}

	direct := &secretWatch{}
	m = &Management{Client: direct.client(t, objs...), apiVersion: clusterv1.GroupVersion.Version}
	if got, err := m.GoneReason(ctx, "fleet", "b"); err != nil || got != "kubeconfig Secret fleet/b-kubeconfig was deleted" {
		t.Errorf("GoneReason(b) = %q, %v", got, err)
	}
	if direct.reads.Load() == 0 {
		t.Error("GoneReason read no Secret: the watch sees nothing")
	}
}
