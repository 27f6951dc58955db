# A module assignment is imported by the namespace of its Cluster objects and its name; the
# configuration is restored from the management cluster's record of its last apply.
import {
  to = gradual_module_assignment.cni
  id = "fleet/cni"
}
