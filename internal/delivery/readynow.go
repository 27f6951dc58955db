package delivery

import (
	"context"
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
// applies, which no apply of key verified yet, whichever engine delivers to the members: the
// bridge is Cluster API's, and its objects are read as they are there, through the joiner's
// kubeconfig Secret (a runner that may not read it is told so, and the joiner's health is not
// read).
func (s *Service) ReadyNow(ctx context.Context, namespace, name string, key records.Key, objs []*unstructured.Unstructured) error {
	c, err := s.cluster(ctx, namespace, name, key, false)
	if err != nil {
		return err
	}
	return c.applier.Wait(ctx, objs, readOnce)
}
