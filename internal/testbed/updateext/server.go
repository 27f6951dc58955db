// Package updateext is a reference Cluster API in-place update extension for the test bed and
// the demo. It serves the Discovery, CanUpdateMachine and UpdateMachine hooks over TLS with
// CAPI's wire types and URL layout, so it stands in for any real extension:
//
//   - CanUpdateMachine answers, per object, a JSON patch that makes the current object's
//     covered fields (by default the Machine's spec.version and the bootstrap config's
//     spec.files and spec.ntp) what the desired object says; other changes it leaves uncovered.
//   - UpdateMachine reports the update in progress (retryAfterSeconds) until a configurable
//     delay has passed, then really changes the machine's kwok Node in its workload cluster
//     (status.nodeInfo.kubeletVersion), and reports it done. It can be told to fail a machine.
//
// It generates its own CA and serving certificate; CABundle is what a client must trust.
package updateext

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

const hooksGroupVersion = "hooks.runtime.cluster.x-k8s.io/v1alpha1"

// Handler names this extension serves (the last segment of their URL path).
const (
	CanUpdateMachineHandler = "can-update-machine"
	UpdateMachineHandler    = "update-machine"
)

// Coverage lists the fields, as JSON pointers into each object, that the extension can change
// in place.
type Coverage struct {
	Machine               []string
	InfrastructureMachine []string
	BootstrapConfig       []string
}

// DefaultCoverage is the Kubernetes version and a few kubeadm bootstrap fields.
func DefaultCoverage() Coverage {
	return Coverage{
		Machine:         []string{"/spec/version"},
		BootstrapConfig: []string{"/spec/files", "/spec/ntp"},
	}
}

// NodeUpdater changes the Node of a machine; ManagementNodes is the real one.
type NodeUpdater interface {
	// SetKubeletVersion makes the Node of Machine namespace/name report version.
	SetKubeletVersion(ctx context.Context, namespace, machine, version string) error
}

// Config of a Server.
type Config struct {
	// Name is what Discovery calls the extension in messages; default "gradual-update".
	Name string
	// Address to listen on; default 127.0.0.1:0 (a free loopback port).
	Address string
	// Hosts are extra names/IPs the serving certificate is valid for (127.0.0.1, ::1 and
	// localhost always are).
	Hosts []string
	// Coverage: what CanUpdateMachine covers; zero means DefaultCoverage.
	Coverage *Coverage
	// Delay is how long an update takes; RetryAfterSeconds is what UpdateMachine answers
	// meanwhile (default 1).
	Delay             time.Duration
	RetryAfterSeconds int32
	// Nodes updates the Node once an update is done; nil updates nothing (unit tests).
	Nodes NodeUpdater
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logf receives a line per request; default: discarded.
	Logf func(format string, args ...any)
}

// Server is a running extension.
type Server struct {
	cfg      Config
	coverage Coverage
	ca       []byte
	url      string
	srv      *http.Server
	lis      net.Listener
	done     chan struct{}

	mu       sync.Mutex
	fail     map[string]string // machine "namespace/name" -> failure message
	updates  map[string]*update
	calls    map[string]int // hook -> calls
	finished []string       // machines whose update completed, in order
}

type update struct {
	desired string // hash of the desired objects; a new one restarts the update
	started time.Time
	done    bool
}

// Start generates the certificates, listens and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Name == "" {
		cfg.Name = "gradual-update"
	}
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1:0"
	}
	if cfg.RetryAfterSeconds <= 0 {
		cfg.RetryAfterSeconds = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Server{cfg: cfg, coverage: DefaultCoverage(), fail: map[string]string{}, updates: map[string]*update{}, calls: map[string]int{}, done: make(chan struct{})}
	if cfg.Coverage != nil {
		s.coverage = *cfg.Coverage
	}
	certs, err := servingcert.New("gradual-update-extension", cfg.Hosts...)
	if err != nil {
		return nil, err
	}
	s.ca = certs.CAPEM
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("update extension: listen on %s: %w", cfg.Address, err)
	}
	s.lis = lis
	s.url = "https://" + lis.Addr().String()
	s.srv = &http.Server{Handler: s.Handler(), TLSConfig: certs.ServerTLS(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.ServeTLS(lis, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logf("update extension: serve: %v", err)
		}
	}()
	return s, nil
}

// URL is the base URL to give clients (https://127.0.0.1:PORT).
func (s *Server) URL() string { return s.url }

// CABundle is the PEM CA that signed the serving certificate.
func (s *Server) CABundle() []byte { return slices.Clone(s.ca) }

// Close stops serving at once, dropping open connections (a graceful shutdown waits about a
// second for HTTP/2 clients to go away, which tests need not pay).
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// FailMachine makes UpdateMachine answer Failure with message for Machine namespace/name;
// an empty message clears it.
func (s *Server) FailMachine(namespace, name, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if message == "" {
		delete(s.fail, namespace+"/"+name)
		return
	}
	s.fail[namespace+"/"+name] = message
}

// Calls is how often each hook was called.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Finished lists the machines ("namespace/name") whose updates completed, in order.
func (s *Server) Finished() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.finished)
}

// Handler serves the hooks at CAPI's paths (any base path prefix is accepted).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "only POST", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
			return
		}
		p := r.URL.Path
		s.cfg.Logf("update extension: POST %s", p)
		var resp any
		switch {
		case strings.HasSuffix(p, "/"+hooksGroupVersion+"/discovery"):
			s.count("Discovery")
			resp = s.discovery()
		case strings.HasSuffix(p, "/"+hooksGroupVersion+"/canupdatemachine/"+CanUpdateMachineHandler):
			s.count("CanUpdateMachine")
			resp = s.canUpdateMachine(body)
		case strings.HasSuffix(p, "/"+hooksGroupVersion+"/updatemachine/"+UpdateMachineHandler):
			s.count("UpdateMachine")
			resp = s.updateMachine(r.Context(), body)
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}

func (s *Server) count(hook string) {
	s.mu.Lock()
	s.calls[hook]++
	s.mu.Unlock()
}

func (s *Server) discovery() *hooksv1.DiscoveryResponse {
	resp := &hooksv1.DiscoveryResponse{CommonResponse: success("")}
	resp.APIVersion, resp.Kind = hooksGroupVersion, "DiscoveryResponse"
	fail := hooksv1.FailurePolicyFail
	timeout := int32(10)
	for name, hook := range map[string]string{CanUpdateMachineHandler: "CanUpdateMachine", UpdateMachineHandler: "UpdateMachine"} {
		resp.Handlers = append(resp.Handlers, hooksv1.ExtensionHandler{
			Name:           name,
			RequestHook:    hooksv1.GroupVersionHook{APIVersion: hooksGroupVersion, Hook: hook},
			TimeoutSeconds: &timeout,
			FailurePolicy:  &fail,
		})
	}
	slices.SortFunc(resp.Handlers, func(a, b hooksv1.ExtensionHandler) int { return strings.Compare(a.Name, b.Name) })
	return resp
}

func success(msg string) hooksv1.CommonResponse {
	return hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess, Message: msg}
}

func failure(msg string) hooksv1.CommonResponse {
	return hooksv1.CommonResponse{Status: hooksv1.ResponseStatusFailure, Message: msg}
}

func (s *Server) canUpdateMachine(body []byte) *hooksv1.CanUpdateMachineResponse {
	resp := &hooksv1.CanUpdateMachineResponse{}
	resp.APIVersion, resp.Kind = hooksGroupVersion, "CanUpdateMachineResponse"
	var req hooksv1.CanUpdateMachineRequest
	if err := json.Unmarshal(body, &req); err != nil {
		resp.CommonResponse = failure("decode CanUpdateMachineRequest: " + err.Error())
		return resp
	}
	type pair struct {
		current, desired any
		paths            []string
		out              *hooksv1.Patch
	}
	for _, p := range []pair{
		{req.Current.Machine, req.Desired.Machine, s.coverage.Machine, &resp.MachinePatch},
		{req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine, s.coverage.InfrastructureMachine, &resp.InfrastructureMachinePatch},
		{req.Current.BootstrapConfig, req.Desired.BootstrapConfig, s.coverage.BootstrapConfig, &resp.BootstrapConfigPatch},
	} {
		patch, err := coveringPatch(p.current, p.desired, p.paths)
		if err != nil {
			resp.CommonResponse = failure(err.Error())
			return resp
		}
		if patch != nil {
			*p.out = hooksv1.Patch{PatchType: hooksv1.JSONPatchType, Patch: patch}
		}
	}
	resp.CommonResponse = success("")
	return resp
}

func (s *Server) updateMachine(ctx context.Context, body []byte) *hooksv1.UpdateMachineResponse {
	resp := &hooksv1.UpdateMachineResponse{}
	resp.APIVersion, resp.Kind = hooksGroupVersion, "UpdateMachineResponse"
	var req hooksv1.UpdateMachineRequest
	if err := json.Unmarshal(body, &req); err != nil {
		resp.CommonResponse = failure("decode UpdateMachineRequest: " + err.Error())
		return resp
	}
	m := &req.Desired.Machine
	key := m.Namespace + "/" + m.Name
	if m.Name == "" {
		resp.CommonResponse = failure("desired machine has no name")
		return resp
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])

	s.mu.Lock()
	if msg, ok := s.fail[key]; ok {
		s.mu.Unlock()
		resp.CommonResponse = failure(fmt.Sprintf("update of machine %s failed: %s", key, msg))
		return resp
	}
	u := s.updates[key]
	if u == nil || u.desired != hash {
		u = &update{desired: hash, started: s.cfg.Now()}
		s.updates[key] = u
	}
	done, elapsed := u.done, s.cfg.Now().Sub(u.started)
	s.mu.Unlock()

	if done {
		resp.CommonResponse = success("machine " + key + " is up to date")
		return resp
	}
	if elapsed < s.cfg.Delay {
		resp.CommonResponse = success(fmt.Sprintf("updating machine %s", key))
		resp.RetryAfterSeconds = s.cfg.RetryAfterSeconds
		return resp
	}
	if err := s.applyToNode(ctx, m); err != nil {
		resp.CommonResponse = failure(fmt.Sprintf("update node of machine %s: %v", key, err))
		return resp
	}
	s.mu.Lock()
	if !u.done {
		u.done = true
		s.finished = append(s.finished, key)
	}
	s.mu.Unlock()
	resp.CommonResponse = success("machine " + key + " updated")
	return resp
}

func (s *Server) applyToNode(ctx context.Context, m *clusterv1.Machine) error {
	if s.cfg.Nodes == nil || m.Spec.Version == "" {
		return nil
	}
	return s.cfg.Nodes.SetKubeletVersion(ctx, m.Namespace, m.Name, m.Spec.Version)
}
