# An in-place update is imported by namespace/cluster/machine_deployment (or, for Machines picked
# by selector, namespace/cluster/key=value,key=value). The version is restored from the Machines'
# spec.version and the revision from their gradual.dev/inplace-update annotations; extensions and
# spec patches cannot be restored and must be written in the configuration again.
terraform import gradual_inplace_update.workers fleet/prod-eu-1/prod-eu-1-md
