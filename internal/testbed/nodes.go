package testbed

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeletVersion is what fake Nodes report until someone (an in-place update) changes it.
const KubeletVersion = "v1.36.3"

// UnmanagedNodeLabel on a Node of a workload cluster keeps kwok away from it: kwok neither
// heartbeats it nor runs its pods, so its status is what whoever made it writes (a test that
// turns a Node NotReady; kwok would set every Node it manages back to Ready within a second).
// Whoever makes one keeps it Ready while it should be (the controller manager marks a Node
// whose heartbeats stop Unknown after its grace period, 3m20s as kwokctl starts it), taints it
// so that nothing schedules onto it (no kwok runs its pods), and deletes it when done: every
// cluster gate reads every Node. Its value is not read.
const UnmanagedNodeLabel = "testbed.gradual.dev/kwok-unmanaged"

// waitAPIReady polls /readyz until the API server answers ok. It stops early with running's error
// when running (which checks the control plane's processes) returns one.
func waitAPIReady(ctx context.Context, cfg *rest.Config, timeout time.Duration, running func() error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err
			return false, nil //nolint:nilerr // not ready yet: poll again, report last at the end
		}
		return string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("API server %s not ready: %w (last error: %v)", cfg.Host, err, last)
	}
	return nil
}

// prepareWorkload makes a fresh workload cluster usable the way a provisioned one is: the
// default ServiceAccount exists (pods are refused without it) and kwok fake Nodes are Ready. It
// stops early with running's error when running returns one.
func prepareWorkload(ctx context.Context, cfg *rest.Config, nodes int, running func() error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(fmt.Sprintf("kwok-node-%d", i)), metav1.CreateOptions{FieldManager: fieldOwner}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create fake node: %w", err)
		}
	}
	// Three minutes: on a loaded 2-core machine (a scale bed coming up while the other lane runs
	// its module tests) the controller manager and kwok took more than one.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil //nolint:nilerr // created by the controller manager shortly: poll again
		}
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return false, nil //nolint:nilerr // transient while the API server settles: poll again
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= nodes, nil
	})
	if err != nil {
		return fmt.Errorf("%d fake nodes and the default ServiceAccount not ready: %w", nodes, err)
	}
	return nil
}

// fakeNode is a Node that kwok's controller keeps Ready (it manages every Node without
// UnmanagedNodeLabel) and whose pods it moves to Running; no taint, so ordinary workloads schedule onto it.
func fakeNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"type":                          "kwok",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:  KubeletVersion,
				OperatingSystem: "linux",
				Architecture:    "amd64",
			},
		},
	}
}

// Check asks a cluster's API server for /readyz once (within 5s); nil means it is serving.
func Check(ctx context.Context, c Cluster) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("cluster %s: /readyz says %q", c.Name, body)
	}
	return nil
}
