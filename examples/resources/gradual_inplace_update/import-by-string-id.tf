# An in-place update is imported by namespace/cluster/machine_deployment (or
# namespace/cluster/control-plane:name for a KubeadmControlPlane). Extensions and spec patches
# cannot be restored and must be written in the configuration again. Only this one-owner form is
# imported: there is no ID for the fleet form (`names` or `selector`), and any other ID is refused
# with `Invalid Import ID`. Apply a fleet configuration instead: the clusters already done plan as
# current and are not changed.
import {
  to = gradual_inplace_update.workers
  id = "fleet/prod-eu-1/prod-eu-1-md"
}
