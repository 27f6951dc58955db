// Package scaleacc holds the acceptance tests that need the scale bed (`gradual-testbed up
// --workloads 3 --clusters N`: many CAPI Clusters over a few kwok API servers) rather than the
// three-cluster fleet the other acceptance tests share. tools/testacc.sh starts one and names it
// in GRADUAL_TESTBED_SCALE_DIR; without it the tests skip.
package scaleacc
