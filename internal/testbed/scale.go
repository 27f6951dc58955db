package testbed

import "fmt"

// The scale bed: many CAPI Clusters over a few kwok API servers. A kwok control plane costs
// ~560 MB and three processes, so a thousand Clusters each with a control plane of its own do
// not fit on one machine; what a rollout's cost grows with is the number of Clusters (Cluster
// objects, kubeconfig Secrets, clients, record reads and writes), which this keeps real.
//
// A Cluster that shares a control plane has its own Cluster object, GradualCluster and
// `<name>-kubeconfig` Secret (holding the shared server's admin kubeconfig). Records in the
// workload cluster are keyed by rollout, not by Cluster, so the Clusters that share one API
// server also share its records for a rollout: reads and writes still happen once per Cluster,
// but what one Cluster records, the others sharing its server see.

// objectsParallel bounds the concurrent writes of Cluster objects and Secrets to the management
// cluster while a fleet comes up.
const objectsParallel = 16

// ScaleWorkloads is a fleet of clusters CAPI Clusters over servers control planes: the first
// servers Clusters (scale-api-1, ...) have a control plane each, the rest (c-0004, ...) share
// the first servers-solo of them round-robin. The last solo servers serve their own Cluster
// only: what is done to one of them (an object deleted by hand, say) concerns that one Cluster,
// which is how a one-Cluster drift repair is measured on a bed whose other Clusters share their
// records. Every Cluster is ready and labelled env=scale.
func ScaleWorkloads(clusters, servers, solo int) ([]WorkloadSpec, error) {
	if servers < 1 || clusters < servers {
		return nil, fmt.Errorf("a scale fleet needs at least one server and at least as many Clusters as servers (got %d Clusters, %d servers)", clusters, servers)
	}
	shared := servers - solo
	if solo < 0 || (shared < 1 && clusters > servers) {
		return nil, fmt.Errorf("%d of %d servers serving one Cluster each leaves none for the other %d Clusters", solo, servers, clusters-servers)
	}
	specs := make([]WorkloadSpec, 0, clusters)
	for i := range clusters {
		s := WorkloadSpec{Labels: map[string]string{"env": "scale"}, Ready: true}
		if i < servers {
			s.Name = fmt.Sprintf("scale-api-%d", i+1)
		} else {
			s.Name = fmt.Sprintf("c-%04d", i+1)
			s.SharesWith = specs[(i-servers)%shared].Name
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// checkShared reports a SharesWith that names no workload with a control plane of its own.
func checkShared(specs []WorkloadSpec) error {
	own := map[string]bool{}
	for _, s := range specs {
		own[s.Name] = s.hasControlPlane()
	}
	for _, s := range specs {
		if s.SharesWith == "" {
			continue
		}
		if s.NoKubeconfig || s.ExecKubeconfig {
			return fmt.Errorf("workload %q: SharesWith needs a kubeconfig (not NoKubeconfig or ExecKubeconfig)", s.Name)
		}
		if !own[s.SharesWith] {
			return fmt.Errorf("workload %q shares the control plane of %q, which has none of its own in this fleet", s.Name, s.SharesWith)
		}
	}
	return nil
}

// linkShared points every sharing workload at its server's kubeconfig and URL; call it with the
// fleet's lock held, once the control planes are up.
func (f *Fleet) linkShared() {
	for _, w := range f.Workloads {
		if b, ok := f.Workloads[w.Spec.SharesWith]; ok && w.Spec.SharesWith != "" {
			w.KubeconfigPath, w.Server = b.KubeconfigPath, b.Server
		}
	}
}
