# A module assignment is imported by the namespace of its Cluster objects and its name; the
# configuration is restored from the management cluster's record of its last apply.
terraform import gradual_module_assignment.cni fleet/cni
