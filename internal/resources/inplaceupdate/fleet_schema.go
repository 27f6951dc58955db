package inplaceupdate

import (
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/fleetresource"
)

// Descriptions of the fleet attributes: clusters picked like a rollout's, owners picked in each.
const (
	descNames           = "Names of the CAPI `Cluster`s whose machines are updated, in namespace `namespace`. Exactly one of `cluster`, `names` and `selector`."
	descClusterSelector = "Picks the CAPI `Cluster`s whose machines are updated by label, like the rollout's `selector` (`match_labels`, " +
		"`match_expressions`). Exactly one of `cluster`, `names` and `selector`. Clusters that are paused, being deleted, not " +
		"initialized or without a usable kubeconfig Secret (their Nodes are verified) are skipped with the reason, as are clusters " +
		"where no owner matches."
	descMachineDeploymentSelector = "Picks, in each cluster, the MachineDeployments to update by label (`match_labels`, " +
		"`match_expressions`; `{}` picks all of the cluster's MachineDeployments). Their names differ from cluster to cluster " +
		"(ClusterClass generates them), so a fleet picks them by label; `machine_deployment` names one of one `cluster`. " +
		"With `update_control_plane` the control plane goes first."
	descUpdateControlPlane = "Update the control plane of each cluster too (the KubeadmControlPlane its `spec.controlPlaneRef` names), " +
		"before its MachineDeployments: Kubernetes' version skew policy wants the control plane first. Each owner is verified " +
		"before the next is written. In a Cluster built from a ClusterClass, the version goes to `spec.topology.version` instead, " +
		"and the topology controller upgrades the control plane and every MachineDeployment it manages (see Managed topologies)."
	descCanary = "Clusters updated first, in this order, in waves of their own (at most `update_limit` at a time). A canary that cannot go first " +
		"(not picked, skipped) refuses the plan, and apply checks it again before anything is written; one already done is no gap."
	descUpdateLimit = "Most clusters updated at once: a whole number ≥ 1 (`\"2\"`) or a percentage of the eligible clusters (`\"25%\"`), " +
		"rounded up, at least 1. Within a cluster, Cluster API paces the machines of each owner by its rollout strategy " +
		"(`maxSurge`/`maxUnavailable`), owner after owner. Default `\"1\"`. (In 0.1.0 a number, which was ignored; old states are upgraded.)"
	descMaxFailures = "Clusters that may fail (not up to date within `verify.timeout`, or the change refused) before no new wave " +
		"starts: a whole number ≥ 0 or a percentage. Default `\"0\"`: the first failure stops the update. A failed cluster is " +
		"never rolled back (an in-place update cannot be undone by writing the old spec back: that is a second update, a " +
		"downgrade); it is named with its owner and machines, and Cluster API goes on with it. Clusters already updated stay."
	descSummary = "The plan in numbers: `clusters` picked, `skipped`, `current` (already done), `changing` (in the waves); machines " +
		"`in_place` (by an extension), `rolling` (replaced by Cluster API) and `unchanged`. Counts, so that a plan over a large " +
		"fleet stays readable; the per-machine detail is in the `gradual_inplace_update_plan` data source. The machine counts come " +
		"from the extensions' answers, which may change before apply, so while a plan changes anything the summary is known after " +
		"apply; the `In-Place Preview` warning shows it as the extensions answer at plan time."
	descAttention = "The clusters a reviewer should look at, with why: skipped (and the reason), machines Cluster API will replace " +
		"(and the fields that force it), machines planned in place that Cluster API may replace all the same (an owner that rolls " +
		"out with `maxSurge` > 0 replaces up to that many, which ones cannot be told; with `fallback = \"none\"` the plan refuses " +
		"instead), an earlier apply that did not finish. Empty when every picked cluster is updated in place or done. Known after " +
		"apply while a plan changes anything (as `summary`)."
	descWaves = "The planned waves in one line, as counts in order with runs of the same size together and the waves of `canary` " +
		"first (`\"3 waves: 1 canary wave of 1 cluster, then 2 waves of 1 cluster\"`, `\"none\"`): one line however many waves, " +
		"so a plan over a thousand clusters one at a time stays readable. The `Planned Waves` warning names the clusters of the first waves. " +
		"The waves are cut from the refreshed state when the configuration picks the same clusters as the state, and apply carries out " +
		"exactly those: a cluster picked since waits for the next plan, one no longer picked (or deleted) is left alone, and apply " +
		"says so (`Apply Differs From The Plan`). On a create, or when the clusters picked change, they are known after apply. " +
		"Before each wave apply asks the extensions again; a wave whose machines would now be replaced (or blocked) though the plan " +
		"showed them updated in place is not started, and nothing of it is written."
)

// clusterSelector is `selector`: the clusters, like the rollout's (exactly one of cluster,
// names and selector is checked on `cluster`).
func clusterSelector() schema.SingleNestedAttribute {
	return fleetresource.LabelSelector(descClusterSelector)
}

// machineDeploymentSelector is `machine_deployment_selector`: a label selector of the same shape.
func machineDeploymentSelector() schema.SingleNestedAttribute {
	return fleetresource.LabelSelector(descMachineDeploymentSelector)
}
