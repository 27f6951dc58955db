package acctest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
)

// Kubectl runs the toolchain's kubectl (GRADUAL_KUBECTL, set by the toolchain's env file) against
// a workload cluster of f, as a person would: what it makes is made by another field manager
// than the provider's.
func Kubectl(t *testing.T, f *testbed.Fleet, cluster string, args ...string) {
	t.Helper()
	bin := os.Getenv("GRADUAL_KUBECTL")
	if bin == "" {
		t.Fatal("GRADUAL_KUBECTL is not set: source the toolchain's env file (the last line tools/toolchain.sh prints)")
	}
	out, err := exec.Command(bin, append([]string{"--kubeconfig", f.Workloads[cluster].KubeconfigPath}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
