package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/fluxdelivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// fluxCost is what Flux's controllers (source-controller and kustomize-controller, long-running
// processes of the test bed) spent while one command ran: CPU seconds (user + system, the
// difference of their counters) and the largest resident set seen, summed over the
// controllers at each sample.
type fluxCost struct {
	cpu     float64
	peakRSS int64
}

// fluxSampler samples Flux's controllers while a command of the Flux engine runs; it measures
// nothing for the direct engine (stop returns zero).
type fluxSampler struct {
	pids    []int
	done    chan struct{}
	wg      sync.WaitGroup
	start   map[int]int64
	last    map[int]int64
	peakRSS int64
}

func (p *providerSide) fluxSampler(engine string) *fluxSampler {
	s := &fluxSampler{done: make(chan struct{}), start: map[int]int64{}, last: map[int]int64{}}
	if engine != engineFlux || p.fleet.Flux == nil {
		close(s.done)
		return s
	}
	for _, proc := range p.fleet.Flux.Processes {
		// The registry is the bed's stand-in for the user's; Flux is the two controllers.
		if strings.HasSuffix(proc.Name, "-controller") {
			s.pids = append(s.pids, proc.PID)
		}
	}
	for _, pid := range s.pids {
		s.start[pid] = cpuTicks(pid)
	}
	s.wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var rss int64
			for _, pid := range s.pids {
				rss += vmRSS(pid)
				if c := cpuTicks(pid); c > s.last[pid] {
					s.last[pid] = c
				}
			}
			s.peakRSS = max(s.peakRSS, rss)
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	})
	return s
}

// stop ends the sampling and returns the controllers' cost since the sampler started.
func (s *fluxSampler) stop() fluxCost {
	if len(s.pids) == 0 {
		return fluxCost{}
	}
	close(s.done)
	s.wg.Wait()
	var ticks int64
	for _, pid := range s.pids {
		ticks += max(cpuTicks(pid), s.last[pid]) - s.start[pid]
	}
	return fluxCost{cpu: float64(ticks) / clockTicks, peakRSS: s.peakRSS}
}

// vmRSS reads a process's current resident set size in bytes (0 when it is gone).
func vmRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// countFluxSources counts the OCIRepositories of rollout name in the fleet's namespace.
func (p *providerSide) countFluxSources(ctx context.Context, name string) (int, error) {
	mc, err := p.fleet.ManagementClient()
	if err != nil {
		return 0, err
	}
	key := records.Key{Kind: records.KindRollout, Namespace: p.fleet.Namespace, Name: name}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(fluxdelivery.OCIRepositoryKind.GroupVersion().WithKind(fluxdelivery.OCIRepositoryKind.Kind + "List"))
	if err := mc.List(ctx, list, client.InNamespace(p.fleet.Namespace), client.MatchingLabels{records.LabelRollout: key.Hash()}); err != nil {
		return 0, fmt.Errorf("count the OCIRepositories of %s: %w", name, err)
	}
	return len(list.Items), nil
}
