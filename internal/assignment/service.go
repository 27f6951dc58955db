package assignment

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// deliverer is what a run of an assignment needs of *delivery.Service once its Lease is held.
// It is a seam for the unit tests, which run assignments over a fake fleet that injects faults
// (unreachable clusters, failing modules, cancellation, clusters joining or leaving) under the
// real engine; production passes *delivery.Service, and the exported functions keep taking it.
type deliverer interface {
	ManagementClient() client.Client
	Observe(ctx context.Context, q fleet.Query, key records.Key, recordNamespace string, drift bool, ignore ...apply.IgnoreRule) (*delivery.Observation, error)
	ObserveRendered(ctx context.Context, q fleet.Query, key records.Key, recordNamespace string, r delivery.Rendering, ignore ...apply.IgnoreRule) (*delivery.Observation, error)
	Discover(ctx context.Context, q fleet.Query) (*fleet.Discovery, error)
	Claims(ctx context.Context, spec delivery.Spec, clusters []string, ignore func(records.Key) bool) ([]delivery.Claim, error)
	Run(ctx context.Context, req delivery.RunRequest) (*delivery.RunResult, error)
	Destroy(ctx context.Context, req delivery.DestroyRequest) ([]string, error)
}

var _ deliverer = (*delivery.Service)(nil)
