#!/usr/bin/env bash
# Builds the pinned test-bed toolchain (and kubectl, for `make bench`) from the Go module proxy
# into a cache outside the clone. Prebuilt-binary downloads are not reachable
# here, so every binary is compiled from its Go module. A second run only checks that the
# binaries exist and finishes in seconds.
#
# Prints, as its last line, the path of an env file that exports the binaries' locations.
set -euo pipefail

KUBERNETES_VERSION=v1.36.3
STAGING_VERSION=v0.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
OPENTOFU_VERSION=v1.12.6
# Cluster API controllers for the opt-in `--cluster-api` test bed. The root module
# and its test module (CAPD, the test extension) are pinned to the same release; the test
# module's go.mod points both at ../ with replaces, which only apply in the main module, so the
# helper module repeats them with the release version.
CLUSTER_API_VERSION=v1.14.2
# Flux's source-controller and kustomize-controller for the opt-in `--flux` test bed. The pair
# is one release line (Flux v2.9 ships v1.9.x of both; both require source-controller/api v1.9),
# and the newest whose go.mod accepts Go 1.26: v1.10.x asks for go 1.27.0. Both go.mods replace
# their ./api and go-digest (for BLAKE3); replaces only apply in the main module, so the helper
# module repeats them with the release versions. Both need github.com/fluxcd/pkg/artifact v0.18.3,
# which the Go module proxy here does not serve (403: v0.18.0 is the newest of v0.18 it has), so
# the helper module replaces it with v0.18.0 (same minor: the controllers build and run with it).
# `go mod tidy` cannot be used: it walks the controllers' test imports (pkg/helmtestserver, not
# served either); `go list -deps -mod=mod` records just what the build needs.
FLUX_SOURCE_CONTROLLER_VERSION=v1.9.6
FLUX_KUSTOMIZE_CONTROLLER_VERSION=v1.9.6
FLUX_GO_DIGEST_REPLACE='github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be'
FLUX_ARTIFACT_REPLACE='github.com/fluxcd/pkg/artifact => github.com/fluxcd/pkg/artifact v0.18.0'
# OpenTofu's own go.mod replaces hcl with its fork; replaces only apply in the main module,
# so the helper module has to repeat it.
OPENTOFU_HCL_REPLACE='github.com/hashicorp/hcl/v2 v2.20.1 => github.com/opentofu/hcl/v2 v2.20.2-0.20251021132045-587d123c2828'

CACHE=${GRADUAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-gradual}
BIN=$CACHE/bin
SRC=$CACHE/src
mkdir -p "$BIN" "$SRC"
# One run at a time: two side by side (a demo and a test run, say) would build and write the
# same binaries twice at once.
exec 8>"$CACHE/.lock"
flock 8
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { printf '[tools] %s\n' "$*" >&2; }

# helper_module DIR MODULE-LINES... writes a throwaway go.mod + tools.go in DIR.
helper_module() {
  local dir=$1 gomod=$2 imports=$3
  mkdir -p "$dir"
  printf '%s\n' "$gomod" >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport (\n%s\n)\n' "$imports" >"$dir/tools.go"
  (cd "$dir" && go mod tidy >/dev/null 2>&1 || go mod tidy)
}

# kubernetes_module writes the helper module that builds from k8s.io/kubernetes: it points every
# staging module (which k8s.io/kubernetes replaces with ./staging) at its release.
kubernetes_module() {
  local dir=$1 replaces="" m
  for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
    cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt \
    kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
    mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller streaming; do
    replaces+="replace k8s.io/$m => k8s.io/$m $STAGING_VERSION"$'\n'
  done
  helper_module "$dir" "module gradual.local/kubernetes
go 1.26
require k8s.io/kubernetes $KUBERNETES_VERSION
$replaces" '	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"'
}

# kubernetes_ldflags sets the version variables: without them the binaries report v0.0.0, which
# kubectl (and kwokctl) refuse.
kubernetes_ldflags() {
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=2026-01-01T00:00:00Z"
  done
  printf '%s' "$ld"
}

build_kubernetes() {
  local out=$BIN/kubernetes-$KUBERNETES_VERSION
  if [[ -x $out/kube-apiserver && -x $out/kube-controller-manager && -x $out/kube-scheduler ]]; then return; fi
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBERNETES_VERSION (cold: ~10 min on 2 cores)"
  local dir=$SRC/kubernetes-$KUBERNETES_VERSION
  kubernetes_module "$dir"
  mkdir -p "$out.tmp"
  (cd "$dir" && go build -trimpath -ldflags "$(kubernetes_ldflags)" -o "$out.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# kubectl of the same release, for `make bench`'s baseline (and people poking at a fleet). A step
# of its own, in its own directory, so that adding it to a cache that already holds the control
# plane binaries builds only kubectl, in the same helper module (and Go build cache).
build_kubectl() {
  local out=$BIN/kubectl-$KUBERNETES_VERSION
  [[ -x $out/kubectl ]] && return
  log "building kubectl $KUBERNETES_VERSION (a few minutes when the control plane binaries are cached)"
  local dir=$SRC/kubernetes-$KUBERNETES_VERSION
  # A helper module written before kubectl was added lacks its imports (and go.sum lines).
  if ! grep -qs 'k8s.io/kubernetes/cmd/kubectl"' "$dir/tools.go"; then kubernetes_module "$dir"; fi
  mkdir -p "$out.tmp"
  (cd "$dir" && go build -trimpath -ldflags "$(kubernetes_ldflags)" -o "$out.tmp/kubectl" k8s.io/kubernetes/cmd/kubectl)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_etcd() {
  local out=$BIN/etcd-$ETCD_VERSION
  [[ -x $out/etcd ]] && return
  log "building etcd $ETCD_VERSION (cold: ~2 min)"
  local dir=$SRC/etcd-$ETCD_VERSION
  helper_module "$dir" "module gradual.local/etcd
go 1.26
require go.etcd.io/etcd/server/v3 $ETCD_VERSION" '	_ "go.etcd.io/etcd/server/v3"'
  mkdir -p "$out.tmp"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_kwok() {
  local out=$BIN/kwok-$KWOK_VERSION
  [[ -x $out/kwok && -x $out/kwokctl ]] && return
  log "building kwok + kwokctl $KWOK_VERSION (cold: ~3 min)"
  mkdir -p "$out.tmp"
  GOFLAGS= GOBIN="$out.tmp" go install -trimpath -ldflags "-s -w" \
    sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_opentofu() {
  local out=$BIN/opentofu-$OPENTOFU_VERSION
  [[ -x $out/tofu ]] && return
  log "building OpenTofu $OPENTOFU_VERSION (cold: ~5 min)"
  local dir=$SRC/opentofu-$OPENTOFU_VERSION
  helper_module "$dir" "module gradual.local/opentofu
go 1.26.6
require github.com/opentofu/opentofu $OPENTOFU_VERSION
replace $OPENTOFU_HCL_REPLACE" '	_ "github.com/opentofu/opentofu/cmd/tofu"'
  mkdir -p "$out.tmp"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/tofu" github.com/opentofu/opentofu/cmd/tofu)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# The five Cluster API managers the `--cluster-api` test bed starts, one `go build` each, one at a
# time and niced (they are heavy; the machine is shared). They share almost all their
# dependencies, so the first build is the slow one (cold: ~10 min on 2 cores, later ones ~2 min).
CAPI_BINARIES=(
  "capi-core sigs.k8s.io/cluster-api/core"
  "capi-kubeadm-bootstrap sigs.k8s.io/cluster-api/bootstrap/kubeadm"
  "capi-kubeadm-control-plane sigs.k8s.io/cluster-api/controlplane/kubeadm"
  "capd sigs.k8s.io/cluster-api/test/infrastructure/docker"
  "capi-test-extension sigs.k8s.io/cluster-api/test/extension"
)

build_cluster_api() {
  local out=$BIN/cluster-api-$CLUSTER_API_VERSION entry name pkg missing=0
  for entry in "${CAPI_BINARIES[@]}"; do [[ -x $out/${entry%% *} ]] || missing=1; done
  ((missing)) || return 0
  local dir=$SRC/cluster-api-$CLUSTER_API_VERSION
  if [[ ! -f $dir/go.sum ]]; then
    helper_module "$dir" "module gradual.local/clusterapi
go 1.26
require (
	sigs.k8s.io/cluster-api $CLUSTER_API_VERSION
	sigs.k8s.io/cluster-api/api $CLUSTER_API_VERSION
	sigs.k8s.io/cluster-api/test $CLUSTER_API_VERSION
)
replace sigs.k8s.io/cluster-api => sigs.k8s.io/cluster-api $CLUSTER_API_VERSION
replace sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api $CLUSTER_API_VERSION" \
'	_ "sigs.k8s.io/cluster-api/core"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
	_ "sigs.k8s.io/cluster-api/test/extension"'
  fi
  local ld="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$CLUSTER_API_VERSION"
  ld+=" -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
  mkdir -p "$out"
  for entry in "${CAPI_BINARIES[@]}"; do
    name=${entry%% *} pkg=${entry#* }
    [[ -x $out/$name ]] && continue
    log "building $name (Cluster API $CLUSTER_API_VERSION, $pkg)"
    local start=$SECONDS
    (cd "$dir" && nice -n 15 go build -trimpath -ldflags "$ld" -o "$out/$name.tmp" "$pkg")
    mv "$out/$name.tmp" "$out/$name"
    log "built $name in $((SECONDS - start))s"
  done
}

# Flux's two controllers of the `--flux` test bed, one niced `go build` each, and their CRDs,
# read from the downloaded modules (config/crd/bases), so the CRDs always match the binaries.
flux_dir() { printf '%s' "$BIN/flux-$FLUX_SOURCE_CONTROLLER_VERSION-$FLUX_KUSTOMIZE_CONTROLLER_VERSION"; }

build_flux() {
  local out dir name pkg start
  out=$(flux_dir)
  if [[ -x $out/source-controller && -x $out/kustomize-controller && -d $out/crds ]]; then return; fi
  dir=$SRC/flux-$FLUX_SOURCE_CONTROLLER_VERSION-$FLUX_KUSTOMIZE_CONTROLLER_VERSION
  if [[ ! -f $dir/go.sum ]]; then
    mkdir -p "$dir"
    cat >"$dir/go.mod" <<EOF
module gradual.local/flux
go 1.26
require (
	github.com/fluxcd/source-controller $FLUX_SOURCE_CONTROLLER_VERSION
	github.com/fluxcd/source-controller/api $FLUX_SOURCE_CONTROLLER_VERSION
	github.com/fluxcd/kustomize-controller $FLUX_KUSTOMIZE_CONTROLLER_VERSION
	github.com/fluxcd/kustomize-controller/api $FLUX_KUSTOMIZE_CONTROLLER_VERSION
)
replace $FLUX_GO_DIGEST_REPLACE
replace $FLUX_ARTIFACT_REPLACE
replace sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
replace sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
replace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1
EOF
    (cd "$dir" && go list -deps github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller >/dev/null)
  fi
  mkdir -p "$out"
  for entry in "source-controller github.com/fluxcd/source-controller" "kustomize-controller github.com/fluxcd/kustomize-controller"; do
    name=${entry%% *} pkg=${entry#* }
    [[ -x $out/$name ]] && continue
    log "building Flux $name ($pkg)"
    start=$SECONDS
    (cd "$dir" && nice -n 15 go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp" "$pkg")
    mv "$out/$name.tmp" "$out/$name"
    log "built $name in $((SECONDS - start))s"
  done
  rm -rf "$out/crds.tmp" && mkdir -p "$out/crds.tmp"
  for entry in "source-controller $FLUX_SOURCE_CONTROLLER_VERSION" "kustomize-controller $FLUX_KUSTOMIZE_CONTROLLER_VERSION"; do
    name=${entry%% *}
    local mod
    mod=$(cd "$dir" && go mod download -json "github.com/fluxcd/$name@${entry#* }" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [[ -d $mod/config/crd/bases ]] || { log "no config/crd/bases in $name's module ($mod)"; exit 1; }
    cp "$mod"/config/crd/bases/*.yaml "$out/crds.tmp/"
  done
  chmod -R u+w "$out/crds.tmp"
  rm -rf "$out/crds" && mv "$out/crds.tmp" "$out/crds"
}

only=${1:-all}
case $only in
  all) build_etcd; build_kwok; build_opentofu; build_kubernetes; build_kubectl ;;
  kubernetes|kubectl|etcd|kwok|opentofu) "build_$only" ;;
  # The real Cluster API controllers of the `--cluster-api` test bed (~7 min cold on 2 cores):
  # `make test` builds them (tools/testacc.sh); the demo does not need them.
  cluster-api) build_cluster_api ;;
  # Flux's source-controller and kustomize-controller of the `--flux` test bed (opt-in; cold ~14 min
  # on 2 cores shared, of which ~13 for source-controller; ~1 min for kustomize-controller after it).
  flux) build_flux ;;
  *) echo "usage: $0 [all|kubernetes|kubectl|etcd|kwok|opentofu|cluster-api|flux]" >&2; exit 2 ;;
esac

env_file=$CACHE/toolchain.env
{
  echo "export GRADUAL_KUBE_APISERVER=$BIN/kubernetes-$KUBERNETES_VERSION/kube-apiserver"
  echo "export GRADUAL_KUBE_CONTROLLER_MANAGER=$BIN/kubernetes-$KUBERNETES_VERSION/kube-controller-manager"
  echo "export GRADUAL_KUBE_SCHEDULER=$BIN/kubernetes-$KUBERNETES_VERSION/kube-scheduler"
  echo "export GRADUAL_ETCD=$BIN/etcd-$ETCD_VERSION/etcd"
  echo "export GRADUAL_KWOK=$BIN/kwok-$KWOK_VERSION/kwok"
  echo "export GRADUAL_KWOKCTL=$BIN/kwok-$KWOK_VERSION/kwokctl"
  echo "export GRADUAL_TOFU=$BIN/opentofu-$OPENTOFU_VERSION/tofu"
  if [[ -x $BIN/kubectl-$KUBERNETES_VERSION/kubectl ]]; then echo "export GRADUAL_KUBECTL=$BIN/kubectl-$KUBERNETES_VERSION/kubectl"; fi
  capi=$BIN/cluster-api-$CLUSTER_API_VERSION
  if [[ -x $capi/capi-test-extension ]]; then
    echo "export GRADUAL_CAPI_CORE=$capi/capi-core"
    echo "export GRADUAL_CAPI_KUBEADM_BOOTSTRAP=$capi/capi-kubeadm-bootstrap"
    echo "export GRADUAL_CAPI_KUBEADM_CONTROL_PLANE=$capi/capi-kubeadm-control-plane"
    echo "export GRADUAL_CAPD=$capi/capd"
    echo "export GRADUAL_CAPI_TEST_EXTENSION=$capi/capi-test-extension"
  fi
  flux=$(flux_dir)
  if [[ -x $flux/kustomize-controller && -x $flux/source-controller && -d $flux/crds ]]; then
    echo "export GRADUAL_FLUX_SOURCE_CONTROLLER=$flux/source-controller"
    echo "export GRADUAL_FLUX_KUSTOMIZE_CONTROLLER=$flux/kustomize-controller"
    echo "export GRADUAL_FLUX_CRDS=$flux/crds"
  fi
  if command -v terraform >/dev/null 2>&1; then echo "export GRADUAL_TERRAFORM=$(command -v terraform)"; fi
} >"$env_file"
echo "$env_file"
