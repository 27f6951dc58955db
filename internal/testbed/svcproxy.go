package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster DNS for the Cluster API managers, which run as local processes: an ExtensionConfig
// with spec.clientConfig.service is called at https://<name>.<namespace>.svc:<port>/…
// (urlForExtension in sigs.k8s.io/cluster-api internal/runtime/client/client.go), a name that
// resolves only inside a cluster. The runtime client's transport is built with
// utilnet.SetTransportDefaults (k8s.io/apimachinery/pkg/util/net/http.go), whose Proxy is
// http.ProxyFromEnvironment (wrapped to also honour CIDRs in NO_PROXY). So the managers are
// started with HTTPS_PROXY pointing at this proxy, which answers CONNECT <name>.<namespace>.svc:<port>
// by dialling a ready endpoint of that Service, read from the management API server as kube-proxy
// would (the Service port's name, the EndpointSlices labelled with the Service's name). The TLS
// session stays end to end: the runtime client still verifies the extension's certificate
// against the ExtensionConfig's caBundle for the host <name>.<namespace>.svc.
//
// Everything else the managers call (the management API server, CAPD's in-memory workload API
// servers on POD_IP=127.0.0.1, webhooks) is on loopback, which Go never proxies
// (golang.org/x/net/http/httpproxy useProxy); NO_PROXY lists loopback anyway, so a change there
// fails here (CONNECT refused) rather than silently.

// svcProxyEnv, set to HOST:PORT, turns any program that links this package (the test binary,
// gradual-testbed) into the fleet's Service proxy (reading Services through KUBECONFIG): the
// Cluster API option starts its own executable again with it, as the Flux option does for its
// OCI registry, so the proxy outlives `gradual-testbed up`.
const svcProxyEnv = "GRADUAL_TESTBED_SVC_PROXY"

func init() {
	if addr := os.Getenv(svcProxyEnv); addr != "" {
		if err := serveSvcProxy(addr, os.Getenv("KUBECONFIG")); err != nil {
			fmt.Fprintln(os.Stderr, "gradual-testbed service proxy:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// serveSvcProxy serves the proxy on addr until the process ends; GET /readyz answers 200.
func serveSvcProxy(addr, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	logger.Printf("service proxy (CONNECT <name>.<namespace>.svc:<port> only) serving on http://%s", l.Addr())
	p := &SvcProxy{Resolve: (&svcResolver{cs: cs}).resolve, Logf: logger.Printf}
	s := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	return s.Serve(l)
}

// SvcProxy is an HTTP CONNECT proxy for Service host names only.
type SvcProxy struct {
	// Resolve maps a Service (namespace, name, port) to the address of a ready endpoint.
	Resolve func(ctx context.Context, namespace, name string, port int32) (string, error)
	Logf    func(format string, args ...any)
}

// ParseServiceHost splits <name>.<namespace>.svc:<port> (the only host form Cluster API's
// runtime client builds for a Service); anything else is refused.
func ParseServiceHost(hostport string) (namespace, name string, port int32, err error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", "", 0, err
	}
	labels := strings.Split(host, ".")
	if len(labels) != 3 || labels[2] != "svc" {
		return "", "", 0, fmt.Errorf("%s is not a <name>.<namespace>.svc host", host)
	}
	for _, l := range labels[:2] {
		if errs := validation.IsDNS1123Label(l); len(errs) > 0 {
			return "", "", 0, fmt.Errorf("%q: %s", l, strings.Join(errs, "; "))
		}
	}
	p, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || p == 0 {
		return "", "", 0, fmt.Errorf("port %q is not a port", portText)
	}
	return labels[1], labels[0], int32(p), nil
}

func (p *SvcProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/readyz" {
		_, _ = io.WriteString(w, "ok")
		return
	}
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT to <name>.<namespace>.svc:<port>", http.StatusMethodNotAllowed)
		return
	}
	ns, name, port, err := ParseServiceHost(r.Host)
	if err != nil {
		p.Logf("refused CONNECT %s: %v", r.Host, err)
		http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	target, err := p.Resolve(ctx, ns, name, port)
	if err != nil {
		p.Logf("CONNECT %s: %v", r.Host, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	upstream, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	if err != nil {
		p.Logf("CONNECT %s → %s: %v", r.Host, target, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = upstream.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	p.Logf("CONNECT %s → %s", r.Host, target)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// Bytes the client sent after the CONNECT line and already buffered go first.
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Peek(n)
			_, _ = upstream.Write(b)
		}
		_, _ = io.Copy(upstream, conn)
		if tc, ok := upstream.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	})
	_, _ = io.Copy(conn, upstream)
	_ = conn.Close()
	wg.Wait()
	_ = upstream.Close()
}

// svcResolver finds a Service's ready endpoint the way kube-proxy routes to it.
type svcResolver struct{ cs kubernetes.Interface }

func (s *svcResolver) resolve(ctx context.Context, namespace, name string, port int32) (string, error) {
	svc, err := s.cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", namespace, name, err)
	}
	slices, err := s.cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return "", fmt.Errorf("service %s/%s endpoint slices: %w", namespace, name, err)
	}
	return ReadyEndpoint(svc, slices.Items, port)
}

// ReadyEndpoint is the address (ip:port) of the first ready endpoint serving the Service's port
// port: the EndpointSlice port carries the Service port's name (how kube-proxy matches them).
func ReadyEndpoint(svc *corev1.Service, slices []discoveryv1.EndpointSlice, port int32) (string, error) {
	var portName string
	found := false
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port {
			portName, found = sp.Name, true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("service %s/%s has no port %d", svc.Namespace, svc.Name, port)
	}
	for _, sl := range slices {
		var target int32
		for _, ep := range sl.Ports {
			if ep.Port != nil && (ep.Name == nil && portName == "" || ep.Name != nil && *ep.Name == portName) {
				target = *ep.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
				continue
			}
			return net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(target))), nil
		}
	}
	return "", errors.New("service " + svc.Namespace + "/" + svc.Name + " port " + strconv.Itoa(int(port)) + " has no ready endpoint")
}

// TestExtensionService is the Service, in the Cluster API namespace, that
// RegisterTestExtensionService puts CAPI's test extension behind (its serving certificate names
// <TestExtensionService>.<namespace>.svc).
const TestExtensionService = "capi-test-extension"

// HostAddress is a global unicast IPv4 address of this machine, or "" if it has none:
// kube-apiserver's service proxy refuses loopback and link-local endpoint addresses, so an
// extension behind a Service is reached on one like it (the test extension listens on every
// address).
func HostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// RegisterTestExtensionService installs CAPI's test extension the way a cluster runs an
// extension, behind a Service, and registers it in an ExtensionConfig of that name whose
// clientConfig names the Service (port 443), not a URL. The Service has no selector: its
// endpoint is the test extension's port on HostAddress, in an EndpointSlice (what the service
// proxy here reads) and in Endpoints naming a Pod with that IP (what kube-apiserver's service
// proxy, which the preview goes through, requires). Cluster API's managers reach it through
// ServiceProxy. The ExtensionConfig keeps the lifecycle hooks' answers in the ConfigMap of
// settingsName (RegisterTestExtension's name), so the two registrations answer alike.
func (f *Fleet) RegisterTestExtensionService(ctx context.Context, name, settingsName string) error {
	f.mu.Lock()
	state := f.ClusterAPI
	f.mu.Unlock()
	if state == nil || state.TestExtensionURL == "" || state.ServiceProxy == "" {
		return fmt.Errorf("fleet %s runs no Cluster API controllers with the service proxy (Options.ClusterAPI)", f.Name)
	}
	ip := HostAddress()
	if ip == "" {
		return errors.New("this machine has no global IPv4 address for an endpoint the API server proxies to")
	}
	_, portText, err := net.SplitHostPort(strings.TrimPrefix(state.TestExtensionURL, "https://"))
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	ns := state.Namespace
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": TestExtensionService, "namespace": ns},
			"spec": map[string]any{"ports": []any{map[string]any{"name": "https", "port": int64(443), "protocol": "TCP", "targetPort": int64(port)}}}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": TestExtensionService + "-0", "namespace": ns},
			// No nodeName: the management cluster's pod GC deletes Pods bound to a Node that does
			// not exist; an unschedulable Pod stays.
			"spec": map[string]any{"containers": []any{map[string]any{"name": "extension", "image": "capi-test-extension"}}}},
	}
	for _, o := range objs {
		if err := apply(ctx, mc, unstructuredOf(o)); err != nil {
			return fmt.Errorf("test extension Service: apply %s: %w", o["kind"], err)
		}
	}
	pod := &corev1.Pod{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: TestExtensionService + "-0"}, pod); err != nil {
		return err
	}
	status := unstructuredOf(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": pod.Name, "namespace": ns},
		"status": map[string]any{"phase": "Running", "podIP": ip, "podIPs": []any{map[string]any{"ip": ip}}}})
	if err := applyStatus(ctx, mc, status); err != nil {
		return fmt.Errorf("test extension Service: Pod status: %w", err)
	}
	if err := f.setTestExtensionEndpoints(ctx, ip, port, string(pod.UID), true); err != nil {
		return err
	}
	ec := testExtensionConfig(name, state)
	if err := unstructured.SetNestedField(ec.Object, map[string]any{
		"service":  map[string]any{"namespace": ns, "name": TestExtensionService, "port": int64(443)},
		"caBundle": encodeBase64(state.CABundle),
	}, "spec", "clientConfig"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(ec.Object, settingsName, "spec", "settings", "extensionConfigName"); err != nil {
		return err
	}
	return apply(ctx, mc, ec)
}

// SetTestExtensionServiceReady marks the endpoint of TestExtensionService ready or not (a
// Service whose Pods are not ready), in its EndpointSlice and Endpoints.
func (f *Fleet) SetTestExtensionServiceReady(ctx context.Context, ready bool) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	f.mu.Lock()
	state := f.ClusterAPI
	f.mu.Unlock()
	pod := &corev1.Pod{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: state.Namespace, Name: TestExtensionService + "-0"}, pod); err != nil {
		return err
	}
	_, portText, _ := net.SplitHostPort(strings.TrimPrefix(state.TestExtensionURL, "https://"))
	port, _ := strconv.Atoi(portText)
	return f.setTestExtensionEndpoints(ctx, pod.Status.PodIP, port, string(pod.UID), ready)
}

func (f *Fleet) setTestExtensionEndpoints(ctx context.Context, ip string, port int, podUID string, ready bool) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	ns := f.ClusterAPI.Namespace
	address := map[string]any{"ip": ip, "targetRef": map[string]any{"kind": "Pod", "namespace": ns, "name": TestExtensionService + "-0", "uid": podUID}}
	subset := map[string]any{"ports": []any{map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}}}
	if ready {
		subset["addresses"] = []any{address}
	} else {
		subset["notReadyAddresses"] = []any{address}
	}
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Endpoints", "metadata": map[string]any{"name": TestExtensionService, "namespace": ns},
			"subsets": []any{subset}},
		{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": TestExtensionService + "-1", "namespace": ns, "labels": map[string]any{
				discoveryv1.LabelServiceName: TestExtensionService, discoveryv1.LabelManagedBy: fieldOwner}},
			"addressType": "IPv4",
			"endpoints":   []any{map[string]any{"addresses": []any{ip}, "conditions": map[string]any{"ready": ready}}},
			"ports":       []any{map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}}},
	}
	for _, o := range objs {
		if err := apply(ctx, mc, unstructuredOf(o)); err != nil {
			return fmt.Errorf("test extension Service: apply %s: %w", o["kind"], err)
		}
	}
	return nil
}

// RemoveTestExtensionService deletes what RegisterTestExtensionService installed but the
// ExtensionConfig (the caller's to remove).
func (f *Fleet) RemoveTestExtensionService(ctx context.Context) error {
	mc, err := f.ManagementClient()
	if err != nil {
		return err
	}
	ns := f.ClusterAPI.Namespace
	var errs []error
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TestExtensionService}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TestExtensionService + "-0"}},
		&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TestExtensionService}}, //nolint:staticcheck // what kube-apiserver's service proxy reads
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TestExtensionService + "-1"}},
	} {
		errs = append(errs, client.IgnoreNotFound(mc.Delete(ctx, o, client.GracePeriodSeconds(0))))
	}
	return errors.Join(errs...)
}

func unstructuredOf(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}
