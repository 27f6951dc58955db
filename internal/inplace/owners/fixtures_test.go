package owners

import "github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners/ownertest"

// The fake management cluster every test here builds on (ownertest), under short names.
var (
	obj              = ownertest.Obj
	edit             = ownertest.Edit
	world            = ownertest.World
	worldWithCluster = ownertest.WorldWithCluster
	topologyWorld    = ownertest.TopologyWorld
	fleetWorld       = ownertest.FleetClusterWorld

	kcGVK         = ownertest.KubeadmConfigGVK
	dmGVK         = ownertest.DevMachineGVK
	deploymentGVK = ownertest.DeploymentGVK
)
