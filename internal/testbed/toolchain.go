package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Toolchain holds the paths of the pinned binaries that `make tools` (tools/toolchain.sh) builds.
// Tofu and Terraform are optional here: the test bed itself does not need them, but acceptance
// tests read them from the same place.
type Toolchain struct {
	KubeAPIServer         string `json:"kubeAPIServer"`
	KubeControllerManager string `json:"kubeControllerManager"`
	KubeScheduler         string `json:"kubeScheduler"`
	Etcd                  string `json:"etcd"`
	Kwok                  string `json:"kwok"`
	Kwokctl               string `json:"kwokctl"`
	Tofu                  string `json:"tofu,omitempty"`
	Terraform             string `json:"terraform,omitempty"`
	// ClusterAPI is optional too: only a fleet started with Options.ClusterAPI needs it
	// (`tools/toolchain.sh cluster-api` builds it).
	ClusterAPI ClusterAPIBinaries `json:"clusterAPI,omitzero"`
	// Flux is optional too: only a fleet started with Options.Flux needs it
	// (`tools/toolchain.sh flux` builds it).
	Flux FluxBinaries `json:"flux,omitzero"`
}

// ClusterAPIBinaries are the Cluster API managers (and CAPI's test extension) that
// `tools/toolchain.sh cluster-api` builds from the Go module proxy at CAPIVersion.
type ClusterAPIBinaries struct {
	Core                string `json:"core,omitempty"`
	KubeadmBootstrap    string `json:"kubeadmBootstrap,omitempty"`
	KubeadmControlPlane string `json:"kubeadmControlPlane,omitempty"`
	// CAPD: CAPI's Docker provider, of which the test bed uses only the in-memory backend.
	CAPD          string `json:"capd,omitempty"`
	TestExtension string `json:"testExtension,omitempty"`
}

// toolchainVars maps each GRADUAL_* variable to its field; required ones first.
func (tc *Toolchain) vars() []struct {
	name     string
	field    *string
	required bool
} {
	return []struct {
		name     string
		field    *string
		required bool
	}{
		{"GRADUAL_KUBE_APISERVER", &tc.KubeAPIServer, true},
		{"GRADUAL_KUBE_CONTROLLER_MANAGER", &tc.KubeControllerManager, true},
		{"GRADUAL_KUBE_SCHEDULER", &tc.KubeScheduler, true},
		{"GRADUAL_ETCD", &tc.Etcd, true},
		{"GRADUAL_KWOK", &tc.Kwok, true},
		{"GRADUAL_KWOKCTL", &tc.Kwokctl, true},
		{"GRADUAL_TOFU", &tc.Tofu, false},
		{"GRADUAL_TERRAFORM", &tc.Terraform, false},
		{"GRADUAL_CAPI_CORE", &tc.ClusterAPI.Core, false},
		{"GRADUAL_CAPI_KUBEADM_BOOTSTRAP", &tc.ClusterAPI.KubeadmBootstrap, false},
		{"GRADUAL_CAPI_KUBEADM_CONTROL_PLANE", &tc.ClusterAPI.KubeadmControlPlane, false},
		{"GRADUAL_CAPD", &tc.ClusterAPI.CAPD, false},
		{"GRADUAL_CAPI_TEST_EXTENSION", &tc.ClusterAPI.TestExtension, false},
		{"GRADUAL_FLUX_SOURCE_CONTROLLER", &tc.Flux.SourceController, false},
		{"GRADUAL_FLUX_KUSTOMIZE_CONTROLLER", &tc.Flux.KustomizeController, false},
		{"GRADUAL_FLUX_CRDS", &tc.Flux.CRDs, false},
	}
}

// CacheDir is where tools/toolchain.sh keeps the toolchain (and where the test bed command keeps
// its default fleet): $GRADUAL_CACHE, else $XDG_CACHE_HOME/terraform-provider-gradual, else
// ~/.cache/terraform-provider-gradual.
func CacheDir() (string, error) {
	if d := os.Getenv("GRADUAL_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "terraform-provider-gradual"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate the toolchain cache: %w", err)
	}
	return filepath.Join(home, ".cache", "terraform-provider-gradual"), nil
}

// ToolchainFromEnv finds the toolchain: each GRADUAL_* variable set in the environment wins,
// the rest come from the toolchain.env file that `make tools` writes into the cache. The error
// says what is missing and that `make tools` builds it.
func ToolchainFromEnv() (Toolchain, error) {
	var tc Toolchain
	fileVars := map[string]string{}
	envFile := ""
	if dir, err := CacheDir(); err == nil {
		envFile = filepath.Join(dir, "toolchain.env")
		if vars, err := readEnvFile(envFile); err == nil {
			fileVars = vars
		} else if !errors.Is(err, os.ErrNotExist) {
			return tc, fmt.Errorf("read %s: %w (rerun `make tools`)", envFile, err)
		}
	}
	var missing []string
	for _, v := range tc.vars() {
		val := os.Getenv(v.name)
		if val == "" {
			val = fileVars[v.name]
		}
		*v.field = val
		if !v.required {
			continue
		}
		if val == "" {
			missing = append(missing, v.name+" is not set")
			continue
		}
		if err := checkExecutable(val); err != nil {
			missing = append(missing, fmt.Sprintf("%s=%s: %v", v.name, val, err))
		}
	}
	if len(missing) == 6 && len(fileVars) == 0 {
		return tc, fmt.Errorf("test bed toolchain not found: GRADUAL_* variables unset and no %s; run `make tools` to build it (cold: ~15 min)", envFile)
	}
	if len(missing) > 0 {
		where := "the environment"
		if envFile != "" {
			where += " or " + envFile
		}
		return tc, fmt.Errorf("test bed toolchain not found in %s: %s; run `make tools` to build it (cold: ~15 min)",
			where, strings.Join(missing, "; "))
	}
	return tc, nil
}

// readEnvFile reads `export NAME=VALUE` lines (the format tools/toolchain.sh writes).
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		vars[strings.TrimSpace(name)] = strings.Trim(strings.TrimSpace(value), `"'`)
	}
	return vars, sc.Err()
}

func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}
