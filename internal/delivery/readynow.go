package delivery

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// readOnce is the wait ReadyNow asks for: shorter than any read, so that the wait reads each
// object once (and once more for why it is not ready) and never waits.
const readOnce = time.Nanosecond

// ReadyNow reads once, without waiting, whether objs are ready on the workload cluster
// namespace/name as a verify judges them (kstatus): nil when every one is, an
// *apply.NotReadyError naming those that are not and why, or the error that kept the cluster
// from answering. A plan reads with it what a bridge gave a cluster that joined between
// applies, which no apply of key verified yet. Delivering through Flux it reads nothing and says
// so (ErrReadsNoWorkload): the runner reaches no workload cluster and reads no kubeconfig Secret,
// and the apply that takes the joiner over verifies it through its Kustomizations.
func (s *Service) ReadyNow(ctx context.Context, namespace, name string, key records.Key, objs []*unstructured.Unstructured) error {
	return s.engine.readyNow(s, ctx, namespace, name, key, objs)
}

// ErrReadsNoWorkload is ReadyNow's answer delivering through Flux.
var ErrReadsNoWorkload = errors.New("delivery through Flux reads no workload cluster; the apply that takes it over verifies it through its Kustomizations")

// readyNow reads the objects through the cluster's kubeconfig, once.
func (directEngine) readyNow(s *Service, ctx context.Context, namespace, name string, key records.Key, objs []*unstructured.Unstructured) error {
	c, err := s.cluster(ctx, namespace, name, key, false)
	if err != nil {
		return err
	}
	return c.applier.Wait(ctx, objs, readOnce)
}

// readyNow reads nothing through Flux (ErrReadsNoWorkload).
func (fluxEngine) readyNow(*Service, context.Context, string, string, records.Key, []*unstructured.Unstructured) error {
	return ErrReadsNoWorkload
}
