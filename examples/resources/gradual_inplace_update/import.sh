# An in-place update is imported by namespace/cluster/machine_deployment (or
# namespace/cluster/control-plane:name for a KubeadmControlPlane). The version is restored from
# the Machines' spec.version and the revision from the owner's gradual.dev/inplace-update
# annotation; extensions and spec patches cannot be restored and must be written in the
# configuration again.
terraform import gradual_inplace_update.workers fleet/prod-eu-1/prod-eu-1-md
