# An in-place update is imported by namespace/cluster/machine_deployment (or
# namespace/cluster/control-plane:name for a KubeadmControlPlane). Extensions and spec patches
# cannot be restored and must be written in the configuration again.
import {
  to = gradual_inplace_update.workers
  id = "fleet/prod-eu-1/prod-eu-1-md"
}
