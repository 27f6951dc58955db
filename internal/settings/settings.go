// Package settings is the provider's settings that reach every resource: one value, built once
// when the provider is configured (providerdata.New), taken as it is by delivery (rollouts and
// module assignments) and by in-place updates. Each setting has one default, here.
//
// It is pure: no Terraform, no Kubernetes clients, so that every layer may take it.
package settings

import (
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

const (
	// DefaultLeaseDuration is how long an apply's Lease outlives a holder that stopped renewing
	// it (a killed process); a live holder renews it every third of that.
	DefaultLeaseDuration = 60 * time.Second
	// DefaultParallelism bounds how many workload clusters are read, planned or cleaned up at
	// once outside the waves.
	DefaultParallelism = 20
	// DefaultRequestTimeout bounds one request to the management or a workload cluster.
	DefaultRequestTimeout = 30 * time.Second
)

// Settings are the provider-wide settings. The zero value of a field means its default
// (WithDefaults).
type Settings struct {
	// LeaseDuration is the provider's `lease_duration`: how long the Lease an apply holds (a
	// rollout's, a module assignment's, an in-place update's per owner) outlives an apply that
	// stopped renewing it, so how long the next apply waits after a killed one.
	LeaseDuration time.Duration
	// Parallelism is the provider's `max_parallel_clusters`: how many workload clusters are read,
	// previewed or cleaned up at once during refresh, plan and destroy. Changes during apply are
	// bounded by each resource's `update_limit` instead.
	Parallelism int
	// RequestTimeout is the provider's `request_timeout`: the time limit of one request to the
	// management or a workload cluster.
	RequestTimeout time.Duration
	// Window is the provider's `maintenance_window`: the window of every rollout and module
	// assignment that sets none of its own (nil: none). In-place updates have no window.
	Window *window.Window
}

// WithDefaults returns s with every unset field at its default.
func (s Settings) WithDefaults() Settings {
	if s.LeaseDuration <= 0 {
		s.LeaseDuration = DefaultLeaseDuration
	}
	if s.Parallelism <= 0 {
		s.Parallelism = DefaultParallelism
	}
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = DefaultRequestTimeout
	}
	return s
}
