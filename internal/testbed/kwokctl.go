package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kwokctl runs kwokctl against one KWOK_WORKDIR that belongs to one fleet, so it never sees,
// lists or deletes clusters of anyone else (kwokctl's default workdir is ~/.kwok).
type kwokctl struct {
	tc      Toolchain
	workdir string // KWOK_WORKDIR
	binDir  string // holds the kubectl stand-in, first on kwokctl's PATH
	logDir  string // kwokctl's own output, per cluster
}

// kubectlStandIn is put on kwokctl's PATH as `kubectl`. kwokctl (binary runtime) shells out to
// kubectl only to ask `get --raw /version` and `get --raw /healthz` while it creates a cluster, and
// downloads kubectl from dl.k8s.io when none is on PATH. A host kubectl may be missing, or a
// version dispatcher that refuses newer servers; either costs minutes of retries. This answers
// once the apiserver port accepts connections; the test bed then checks /readyz itself.
const kubectlStandIn = `#!/usr/bin/env bash
# kubectl stand-in written by the gradual test bed for kwokctl only (internal/testbed/kwokctl.go).
kubeconfig="" raw=""
while (($#)); do
  case $1 in
    --kubeconfig) kubeconfig=$2; shift ;;
    --kubeconfig=*) kubeconfig=${1#*=} ;;
    --raw) raw=$2; shift ;;
    --raw=*) raw=${1#*=} ;;
  esac
  shift
done
server=$(sed -n 's/^ *server: *//p' "$kubeconfig" | head -n1)
hostport=${server#*://}; hostport=${hostport%%/*}
host=${hostport%:*}; port=${hostport##*:}
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  echo "kubectl stand-in: $server is not accepting connections yet" >&2; exit 1
fi
case $raw in
  /healthz|/readyz|/livez) printf ok ;;
  /version) printf '{}' ;;
  *) echo "kubectl stand-in: only 'get --raw /healthz|/version' is supported; use a real kubectl with --kubeconfig" >&2; exit 1 ;;
esac
`

func newKwokctl(tc Toolchain, dir string) (*kwokctl, error) {
	k := &kwokctl{
		tc:      tc,
		workdir: filepath.Join(dir, "kwok"),
		binDir:  filepath.Join(dir, "bin"),
		logDir:  filepath.Join(dir, "logs"),
	}
	for _, d := range []string{k.workdir, k.binDir, k.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(k.binDir, "kubectl"), []byte(kubectlStandIn), 0o755); err != nil {
		return nil, err
	}
	return k, nil
}

// env is the parent environment without KWOK_* settings (a user's KWOK_RUNTIME or
// KWOK_KUBE_VERSION must not leak in), plus our workdir and the kubectl stand-in.
func (k *kwokctl) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KWOK_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"KWOK_WORKDIR="+k.workdir,
		"PATH="+k.binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
}

func (k *kwokctl) run(ctx context.Context, logName string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.tc.Kwokctl, args...)
	cmd.Env = k.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if logName != "" {
		_ = os.WriteFile(filepath.Join(k.logDir, logName), out.Bytes(), 0o644)
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:min(len(args), 2)], " "), err, tail(out.String(), 30))
	}
	return out.Bytes(), nil
}

// kubeconfigPath is where kwokctl writes the context it adds for a cluster (never ~/.kube/config).
func (k *kwokctl) kubeconfigPath(name string) string {
	return filepath.Join(k.workdir, name+".kubeconfig")
}

// clusterDir is kwokctl's directory for one cluster: config, pki, pids, logs, etcd data.
func (k *kwokctl) clusterDir(name string) string {
	return filepath.Join(k.workdir, "clusters", name)
}

// createAttempts bounds the tries of create: the ports it picks are free when picked (the
// kernel's, bound at :0) but are bound by the components a moment later, so another process
// (test packages run side by side) can take one in between. A failed try is torn down and
// retried on new ports.
const createAttempts = 3

// create starts a cluster with the local binaries on ports the test bed picks itself: kwokctl
// counts down from 32767 in every process, so two kwokctl runs at once (two test packages, or
// our own parallel creates) would otherwise race for the same ports.
func (k *kwokctl) create(ctx context.Context, name string) error {
	var err error
	for range createAttempts {
		if err = k.createOnce(ctx, name); err == nil || ctx.Err() != nil {
			return err
		}
		_ = k.delete(ctx, name)
	}
	return err
}

// createOnce is one try of create, on ports picked now.
func (k *kwokctl) createOnce(ctx context.Context, name string) error {
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	// etcd's peer port has no flag; a config file carries it. The controller manager and the
	// scheduler run without leader election: each cluster has one of each, and with it a
	// cluster frozen by a fault test (SIGSTOP, then SIGCONT) would lose them for good — they
	// exit when they find their lease expired — leaving Deployments and Namespace deletions
	// stuck for every later test on that cluster. kwok manages every Node but those labelled
	// UnmanagedNodeLabel (kwokctl starts it with --manage-all-nodes=true; the later flag wins).
	cfg := filepath.Join(k.workdir, name+".kwokctl.yaml")
	cfgText := fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  etcdPeerPort: %d
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - {key: leader-elect, value: "false"}
- name: kube-scheduler
  extraArgs:
  - {key: leader-elect, value: "false"}
- name: kwok-controller
  extraArgs:
  - {key: manage-all-nodes, value: "false"}
  - {key: manage-nodes-with-label-selector, value: "!%s"}
`, ports[5], UnmanagedNodeLabel)
	if err := os.WriteFile(cfg, []byte(cfgText), 0o644); err != nil {
		return err
	}
	_, err = k.run(ctx, name+".create.log",
		"create", "cluster",
		"--name", name,
		"--config", cfg,
		"--runtime", "binary",
		"--kube-apiserver-binary", k.tc.KubeAPIServer,
		"--kube-controller-manager-binary", k.tc.KubeControllerManager,
		"--kube-scheduler-binary", k.tc.KubeScheduler,
		"--etcd-binary", k.tc.Etcd,
		"--kwok-controller-binary", k.tc.Kwok,
		"--kube-apiserver-port", strconv.Itoa(ports[0]),
		"--etcd-port", strconv.Itoa(ports[1]),
		"--controller-port", strconv.Itoa(ports[2]),
		"--kube-controller-manager-port", strconv.Itoa(ports[3]),
		"--kube-scheduler-port", strconv.Itoa(ports[4]),
		"--kubeconfig", k.kubeconfigPath(name),
		"--quiet-pull",
		"--wait", "120s",
	)
	return err
}

// delete stops a cluster's processes and removes its files.
func (k *kwokctl) delete(ctx context.Context, name string) error {
	_, err := k.run(ctx, name+".delete.log", "delete", "cluster", "--name", name, "--kubeconfig", k.kubeconfigPath(name))
	return err
}

// list names the clusters in this workdir (and only this one).
func (k *kwokctl) list(ctx context.Context) ([]string, error) {
	out, err := k.run(ctx, "", "get", "clusters")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		// kwokctl logs to the same stream; names are bare words.
		if line == "" || strings.ContainsAny(line, " \t=") {
			continue
		}
		names = append(names, line)
	}
	return names, nil
}

// processes returns the live component processes of a cluster, from kwokctl's pid files,
// keeping only those whose working directory is the cluster's directory (a pid file can outlive
// its process, and the pid be reused by someone else's).
func (k *kwokctl) processes(name string) []int {
	dir := k.clusterDir(name)
	var pids []int
	for _, c := range k.components(name) {
		if ownedAlive(c.pid, dir) {
			pids = append(pids, c.pid)
		}
	}
	return pids
}

// component is one process kwokctl started for a cluster, as its pid file names it.
type component struct {
	name string // etcd, kube-apiserver, kwok-controller, …
	pid  int
}

// components reads a cluster's pid files; unreadable ones are left out.
func (k *kwokctl) components(name string) []component {
	files, _ := filepath.Glob(filepath.Join(k.clusterDir(name), "pids", "*.pid"))
	var out []component
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pid <= 0 {
			continue
		}
		out = append(out, component{name: strings.TrimSuffix(filepath.Base(f), ".pid"), pid: pid})
	}
	return out
}

// exited returns an error naming the components of a cluster whose processes are gone (a pid file
// whose process no longer runs), with the end of each one's log, or nil while all run. A
// component that exits at start (a port taken, a flag refused) would otherwise show only as an API
// server or a controller that never gets ready, minutes later.
func (k *kwokctl) exited(name string) error {
	dir := k.clusterDir(name)
	var errs []error
	for _, c := range k.components(name) {
		if ownedAlive(c.pid, dir) {
			continue
		}
		log, _ := os.ReadFile(filepath.Join(dir, "logs", c.name+".log"))
		errs = append(errs, fmt.Errorf("%s exited; the end of its log:\n%s", c.name, tail(string(log), 5)))
	}
	return errors.Join(errs...)
}

// ownedAlive reports whether pid runs (and is not a zombie) with its cwd inside dir.
func ownedAlive(pid int, dir string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	cwd = strings.TrimSuffix(cwd, " (deleted)") // kwokctl delete removes the directory first
	return cwd == dir || strings.HasPrefix(cwd, dir+string(os.PathSeparator))
}

// killOwned sends SIGKILL to the processes still alive after kwokctl delete, if any.
func killOwned(pids []int, dir string) {
	for _, pid := range pids {
		if ownedAlive(pid, dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	for i, p := range parts {
		// Components log whole health reports on one line (kube-controller-manager's is 5 kB):
		// the start of each line says what went wrong.
		if len(p) > maxTailLine {
			parts[i] = p[:maxTailLine] + " …"
		}
	}
	return strings.Join(parts, "\n")
}

// maxTailLine is the most of one log line tail keeps.
const maxTailLine = 400

var errNoControlPlane = errors.New("this workload has no control plane of its own (NoKubeconfig or ExecKubeconfig)")
