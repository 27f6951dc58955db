# An in-place update is imported by namespace/cluster/machine_deployment (or
# namespace/cluster/control-plane:name for a KubeadmControlPlane). The version is restored from
# the Machines' spec.version and the revision from the owner's gradual.dev/inplace-update
# annotation; extensions and spec patches cannot be restored and must be written in the
# configuration again. Only the one-owner form is imported: there is no ID for the fleet form
# (`names` or `selector`; any other ID is refused with `Invalid Import ID`): apply its
# configuration, which changes nothing on the clusters already done.
terraform import gradual_inplace_update.workers fleet/prod-eu-1/prod-eu-1-md
