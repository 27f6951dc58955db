package extension

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

// tlsServer serves h over TLS and returns an endpoint that trusts it.
func tlsServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, Endpoint) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, Endpoint{Name: "test-ext", URL: srv.URL, CABundle: ca}
}

func newClient(t *testing.T, ep Endpoint) *Client {
	t.Helper()
	c, err := New(ep, Options{MinRetryWait: 5 * time.Millisecond, MaxRetryWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func wantKind(t *testing.T, err error, kind Kind, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got none", kind)
	}
	if got := KindOf(err); got != kind {
		t.Fatalf("want kind %s, got %q: %v", kind, got, err)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestDiscoverUsesCAPIPathAndTypes(t *testing.T) {
	var gotPath, gotQuery string
	var gotReq map[string]any
	_, ep := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.Path, r.URL.RawQuery
		if r.Method != http.MethodPost {
			t.Errorf("method %s, want POST", r.Method)
		}
		_ = json.NewDecoder(r.Body).Decode(&gotReq)
		ignore := hooksv1.FailurePolicyIgnore
		writeJSON(w, hooksv1.DiscoveryResponse{
			CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
			Handlers: []hooksv1.ExtensionHandler{
				{Name: "can-update", RequestHook: hooksv1.GroupVersionHook{APIVersion: hooksGroupVersion, Hook: HookCanUpdateMachine}, TimeoutSeconds: new(int32(90))},
				{Name: "update", RequestHook: hooksv1.GroupVersionHook{APIVersion: hooksGroupVersion, Hook: HookUpdateMachine}, FailurePolicy: &ignore},
				{Name: "other", RequestHook: hooksv1.GroupVersionHook{APIVersion: hooksGroupVersion, Hook: "BeforeClusterCreate"}},
			},
		})
	})
	ep.URL += "/prefix"
	resp, err := newClient(t, ep).Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/prefix/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery" {
		t.Errorf("path %q", gotPath)
	}
	if gotQuery != "timeout=10s" {
		t.Errorf("query %q, want timeout=10s", gotQuery)
	}
	if gotReq["apiVersion"] != hooksGroupVersion || gotReq["kind"] != "DiscoveryRequest" {
		t.Errorf("request %v lacks apiVersion/kind", gotReq)
	}
	can := HandlersFor(resp, HookCanUpdateMachine)
	if len(can) != 1 || can[0].Name != "can-update" || can[0].Timeout != MaxTimeout || can[0].FailurePolicy != hooksv1.FailurePolicyFail {
		t.Errorf("CanUpdateMachine handlers %+v", can)
	}
	upd := HandlersFor(resp, HookUpdateMachine)
	if len(upd) != 1 || upd[0].FailurePolicy != hooksv1.FailurePolicyIgnore || upd[0].Timeout != 0 {
		t.Errorf("UpdateMachine handlers %+v", upd)
	}
}

func TestCanUpdateMachineRoundTrip(t *testing.T) {
	var gotPath string
	var got hooksv1.CanUpdateMachineRequest
	_, ep := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decode request: %v", err)
		}
		writeJSON(w, hooksv1.CanUpdateMachineResponse{
			CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
			MachinePatch:   hooksv1.Patch{PatchType: hooksv1.JSONPatchType, Patch: []byte(`[{"op":"replace","path":"/spec/version","value":"v1.37.0"}]`)},
		})
	})
	ep.Settings = map[string]string{"mode": "fast"}
	req := &hooksv1.CanUpdateMachineRequest{}
	req.Current.Machine.Name = "m-1"
	req.Current.Machine.Spec.Version = "v1.36.3"
	req.Desired.Machine.Spec.Version = "v1.37.0"
	resp, err := newClient(t, ep).CanUpdateMachine(t.Context(), "can-update", req)
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/can-update" {
		t.Errorf("path %q", gotPath)
	}
	if got.Kind != "CanUpdateMachineRequest" || got.APIVersion != hooksGroupVersion || got.Current.Machine.Name != "m-1" || got.Settings["mode"] != "fast" {
		t.Errorf("request %+v", got)
	}
	if resp.MachinePatch.PatchType != hooksv1.JSONPatchType || !strings.Contains(string(resp.MachinePatch.Patch), "/spec/version") {
		t.Errorf("patch %+v", resp.MachinePatch)
	}
}

func TestCanUpdateMachineSetRoundTrip(t *testing.T) {
	var gotPath string
	var got hooksv1.CanUpdateMachineSetRequest
	_, ep := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decode request: %v", err)
		}
		writeJSON(w, hooksv1.CanUpdateMachineSetResponse{
			CommonResponse:  hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
			MachineSetPatch: hooksv1.Patch{PatchType: hooksv1.JSONPatchType, Patch: []byte(`[{"op":"replace","path":"/spec/template/spec/version","value":"v1.37.0"}]`)},
		})
	})
	req := &hooksv1.CanUpdateMachineSetRequest{}
	req.Current.MachineSet.Name = "md-0"
	resp, err := newClient(t, ep).CanUpdateMachineSet(t.Context(), "can-update-set", req)
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachineset/can-update-set" {
		t.Errorf("path %q", gotPath)
	}
	if got.Kind != "CanUpdateMachineSetRequest" || got.APIVersion != hooksGroupVersion || got.Current.MachineSet.Name != "md-0" {
		t.Errorf("request %+v", got)
	}
	if !strings.Contains(string(resp.MachineSetPatch.Patch), "/spec/template/spec/version") {
		t.Errorf("patch %+v", resp.MachineSetPatch)
	}
	_, ep = tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, hooksv1.CanUpdateMachineSetResponse{
			CommonResponse:               hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
			BootstrapConfigTemplatePatch: hooksv1.Patch{PatchType: "StrategicMerge", Patch: []byte(`{}`)},
		})
	})
	_, err = newClient(t, ep).CanUpdateMachineSet(t.Context(), "h", &hooksv1.CanUpdateMachineSetRequest{})
	wantKind(t, err, KindMalformed, "StrategicMerge")
}

func TestCanUpdateMachineRefusesUnknownPatchType(t *testing.T) {
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, hooksv1.CanUpdateMachineResponse{
			CommonResponse:       hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
			BootstrapConfigPatch: hooksv1.Patch{PatchType: "StrategicMerge", Patch: []byte(`{}`)},
		})
	})
	_, err := newClient(t, ep).CanUpdateMachine(t.Context(), "h", &hooksv1.CanUpdateMachineRequest{})
	wantKind(t, err, KindMalformed, "StrategicMerge")
}

func TestUpdateMachineRetryAfterIsCapped(t *testing.T) {
	var gotPath string
	_, ep := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		writeJSON(w, hooksv1.UpdateMachineResponse{CommonRetryResponse: hooksv1.CommonRetryResponse{
			CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}, RetryAfterSeconds: 3600,
		}})
	})
	c := newClient(t, ep)
	resp, err := c.UpdateMachine(t.Context(), "update", &hooksv1.UpdateMachineRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/update" {
		t.Errorf("path %q", gotPath)
	}
	if got := c.RetryAfter(resp); got != DefaultMaxRetryAfter {
		t.Errorf("RetryAfter = %s, want the cap %s", got, DefaultMaxRetryAfter)
	}
	if got := c.RetryAfter(&hooksv1.UpdateMachineResponse{}); got != 0 {
		t.Errorf("RetryAfter of a finished update = %s", got)
	}
}

func TestUpdateMachineFailureMessageTruncated(t *testing.T) {
	long := strings.Repeat("x", 5000)
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, hooksv1.UpdateMachineResponse{CommonRetryResponse: hooksv1.CommonRetryResponse{
			CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusFailure, Message: "disk full " + long},
		}})
	})
	_, err := newClient(t, ep).UpdateMachine(t.Context(), "update", &hooksv1.UpdateMachineRequest{})
	wantKind(t, err, KindFailure, "disk full", "more bytes", `extension "test-ext" UpdateMachine handler update`)
	if len(err.Error()) > 1000 {
		t.Errorf("error is %d bytes long; the message was not truncated", len(err.Error()))
	}
}

func TestHangingExtensionTimesOut(t *testing.T) {
	release := make(chan struct{})
	_, ep := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	ep.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := newClient(t, ep).CanUpdateMachine(t.Context(), "h", &hooksv1.CanUpdateMachineRequest{})
	wantKind(t, err, KindTimeout, "no answer within the 300ms timeout")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("hang took %s to report, want about the 300ms timeout", d)
	}
}

func TestServerErrorRetriedThenReported(t *testing.T) {
	var calls atomic.Int32
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "boom: "+strings.Repeat("y", 2000), http.StatusInternalServerError)
	})
	_, err := newClient(t, ep).UpdateMachine(t.Context(), "update", &hooksv1.UpdateMachineRequest{})
	wantKind(t, err, KindStatus, "HTTP 500", "boom", "more bytes")
	if got := calls.Load(); got != 1+DefaultRetries {
		t.Errorf("%d calls, want %d (1 + retries)", got, 1+DefaultRetries)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	var calls atomic.Int32
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			// An hour's Retry-After must not park the call: it is capped at MaxRetryWait.
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, hooksv1.DiscoveryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}})
	})
	start := time.Now()
	if _, err := newClient(t, ep).Discover(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s: Retry-After was not capped", d)
	}
}

func TestNotFoundNotRetried(t *testing.T) {
	var calls atomic.Int32
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.NotFound(w, nil)
	})
	_, err := newClient(t, ep).CanUpdateMachine(t.Context(), "missing", &hooksv1.CanUpdateMachineRequest{})
	wantKind(t, err, KindStatus, "HTTP 404")
	if calls.Load() != 1 {
		t.Errorf("a 404 was retried (%d calls)", calls.Load())
	}
}

func TestMalformedJSON(t *testing.T) {
	for name, body := range map[string]string{
		"not json":      `<html>oops</html>`,
		"truncated":     `{"status":"Success",`,
		"wrong type":    `{"status":"Success","retryAfterSeconds":"soon"}`,
		"no status":     `{}`,
		"odd status":    `{"status":"Maybe"}`,
		"trailing data": `{"status":"Success"} {"status":"Failure"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
			_, err := newClient(t, ep).UpdateMachine(t.Context(), "update", &hooksv1.UpdateMachineRequest{})
			wantKind(t, err, KindMalformed)
		})
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var followed atomic.Bool
	target, _ := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		followed.Store(true)
		writeJSON(w, hooksv1.DiscoveryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}})
	})
	_, ep := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	_, err := newClient(t, ep).Discover(t.Context())
	wantKind(t, err, KindRedirect, "HTTP 307", target.URL)
	if followed.Load() {
		t.Error("the redirect was followed")
	}
}

func TestResponseTooLarge(t *testing.T) {
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"status":"Success","message":"`+strings.Repeat("z", DefaultMaxResponseBytes)+`"}`)
	})
	_, err := newClient(t, ep).Discover(t.Context())
	wantKind(t, err, KindTooLarge)
}

func TestPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, hooksv1.DiscoveryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}})
	}))
	defer srv.Close()

	_, err := New(Endpoint{Name: "plain", URL: srv.URL}, Options{})
	wantKind(t, err, KindInsecureURL, "plain HTTP is refused")

	_, err = New(Endpoint{Name: "remote", URL: "http://extension.example.com:8443", AllowInsecureLoopback: true}, Options{})
	wantKind(t, err, KindInsecureURL, "only to a loopback address")

	c, err := New(Endpoint{Name: "local", URL: srv.URL, AllowInsecureLoopback: true}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Discover(t.Context()); err != nil {
		t.Fatalf("loopback HTTP, explicitly allowed: %v", err)
	}
}

func TestEndpointValidation(t *testing.T) {
	for name, ep := range map[string]Endpoint{
		"timeout too long": {URL: "https://127.0.0.1:1", Timeout: 31 * time.Second},
		"negative timeout": {URL: "https://127.0.0.1:1", Timeout: -time.Second},
		"user info":        {URL: "https://u:p@127.0.0.1:1"},
		"query":            {URL: "https://127.0.0.1:1/?a=b"},
		"no host":          {URL: "https:///path"},
		"bad CA":           {URL: "https://127.0.0.1:1", CABundle: []byte("not pem")},
		"ftp":              {URL: "ftp://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(ep, Options{})
			wantKind(t, err, KindConfig)
		})
	}
}

func TestUntrustedCertificate(t *testing.T) {
	var calls atomic.Int32
	_, ep := tlsServer(t, func(w http.ResponseWriter, _ *http.Request) { calls.Add(1) })
	// No CA bundle: the system roots, which do not know httptest's certificate.
	ep.CABundle = nil
	_, err := newClient(t, ep).Discover(t.Context())
	wantKind(t, err, KindConnection, "certificate")
	if calls.Load() != 0 {
		t.Error("the request reached an untrusted server")
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = newClient(t, Endpoint{Name: "gone", URL: "https://" + addr}).Discover(t.Context())
	wantKind(t, err, KindConnection, "refused")
}

func TestFromExtensionConfig(t *testing.T) {
	u := "https://10.0.0.1:9443/ext"
	ec := &runtimev1.ExtensionConfig{}
	ec.Name = "updater"
	ec.Spec.ClientConfig.URL = &u
	ec.Spec.ClientConfig.CABundle = []byte("pem")
	ec.Spec.Settings = map[string]string{"a": "b"}
	mgmt := &rest.Config{Host: "https://mgmt.example:6443"}
	ep, err := FromExtensionConfig(ec, mgmt)
	if err != nil || ep.URL != u || ep.Name != "updater" || string(ep.CABundle) != "pem" || ep.Settings["a"] != "b" || ep.Service != nil {
		t.Errorf("FromExtensionConfig = %+v, %v", ep, err)
	}
	ec.Spec.ClientConfig.URL = nil
	port, p := int32(8443), "/hooks"
	ec.Spec.ClientConfig.Service = &runtimev1.ServiceReference{Namespace: "capi", Name: "updater", Port: &port, Path: &p}
	ep, err = FromExtensionConfig(ec, mgmt)
	if err != nil || ep.URL != "" || ep.Service == nil || *ep.Service != (Service{Namespace: "capi", Name: "updater", Port: 8443, Path: "/hooks"}) ||
		ep.Proxy != mgmt || ep.CABundle != nil || ep.Settings["a"] != "b" {
		t.Errorf("FromExtensionConfig(service) = %+v, %v", ep, err)
	}
	ec.Spec.ClientConfig.Service = nil
	_, err = FromExtensionConfig(ec, mgmt)
	wantKind(t, err, KindConfig, "neither")
	if got := HandlerName("can-update.updater", "updater"); got != "can-update" {
		t.Errorf("HandlerName = %q", got)
	}
}

// The proxy URL is the API server's (path prefix included), the Service's proxy subresource
// with Cluster API's https scheme and default port 443, and the path, which cannot climb out.
func TestProxyURL(t *testing.T) {
	for _, tc := range []struct {
		host string
		svc  Service
		want string
	}{
		{"https://10.0.0.1:6443", Service{Namespace: "capi", Name: "ext"}, "https://10.0.0.1:6443/api/v1/namespaces/capi/services/https:ext:443/proxy"},
		{"https://10.0.0.1:6443/", Service{Namespace: "capi", Name: "ext", Port: 9443, Path: "/hooks/"}, "https://10.0.0.1:6443/api/v1/namespaces/capi/services/https:ext:9443/proxy/hooks"},
		{"https://rancher.example/k8s/clusters/c-1", Service{Namespace: "capi", Name: "ext"}, "https://rancher.example/k8s/clusters/c-1/api/v1/namespaces/capi/services/https:ext:443/proxy"},
		{"https://mgmt.example:6443", Service{Namespace: "capi", Name: "ext", Path: "../../../secrets"}, "https://mgmt.example:6443/api/v1/namespaces/capi/services/https:ext:443/proxy/secrets"},
	} {
		u, err := ProxyURL(&rest.Config{Host: tc.host}, tc.svc)
		if err != nil || u.String() != tc.want {
			t.Errorf("ProxyURL(%q, %+v) = %v, %v; want %s", tc.host, tc.svc, u, err, tc.want)
		}
	}
	for name, svc := range map[string]Service{
		"slash in name":      {Namespace: "capi", Name: "a/b"},
		"empty namespace":    {Name: "ext"},
		"port out of range":  {Namespace: "capi", Name: "ext", Port: 70000},
		"upper-case service": {Namespace: "capi", Name: "Ext"},
	} {
		if _, err := ProxyURL(&rest.Config{Host: "https://10.0.0.1:6443"}, svc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ProxyURL(nil, Service{Namespace: "capi", Name: "ext"}); err == nil {
		t.Error("no REST config: accepted")
	}
	if got := (Service{Namespace: "capi", Name: "ext"}).InClusterURL(); got != "https://ext.capi.svc:443" {
		t.Errorf("InClusterURL = %q", got)
	}
}

// A Service endpoint is called over the management cluster's transport: the API server's CA
// verifies it, its credentials go along, the hook path follows the proxy path with CAPI's
// timeout query; the extension's answer (or the API server's own error) comes back as from a
// direct call, and errors show the in-cluster URL.
func TestServiceThroughTheAPIServerProxy(t *testing.T) {
	var gotPath, gotAuth, gotQuery atomic.Value
	apiserver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath.Store(r.URL.Path)
		gotAuth.Store(r.Header.Get("Authorization"))
		gotQuery.Store(r.URL.RawQuery)
		if strings.Contains(r.URL.Path, "/services/https:down:443/") {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"kind":"Status","message":"no endpoints available for service \"down\"","code":503}`)
			return
		}
		writeJSON(w, &hooksv1.DiscoveryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
			Handlers: []hooksv1.ExtensionHandler{{Name: "can", RequestHook: hooksv1.GroupVersionHook{APIVersion: hooksGroupVersion, Hook: HookCanUpdateMachine}}}})
	}))
	t.Cleanup(apiserver.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: apiserver.Certificate().Raw})
	mgmt := &rest.Config{Host: apiserver.URL, BearerToken: "secret-token", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}

	c := newClient(t, Endpoint{Name: "svc-ext", Service: &Service{Namespace: "capi", Name: "ext", Port: 9443, Path: "/x"}, Proxy: mgmt})
	resp, err := c.Discover(t.Context())
	if err != nil || len(HandlersFor(resp, HookCanUpdateMachine)) != 1 {
		t.Fatalf("Discover = %+v, %v", resp, err)
	}
	if p := gotPath.Load(); p != "/api/v1/namespaces/capi/services/https:ext:9443/proxy/x/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery" {
		t.Errorf("path %v", p)
	}
	if a := gotAuth.Load(); a != "Bearer secret-token" {
		t.Errorf("Authorization %v", a)
	}
	if q := gotQuery.Load(); q != "timeout=10s" {
		t.Errorf("query %v", q)
	}

	_, err = newClient(t, Endpoint{Name: "down", Service: &Service{Namespace: "capi", Name: "down"}, Proxy: mgmt}).Discover(t.Context())
	wantKind(t, err, KindStatus, "503", "no endpoints available", "https://down.capi.svc:443 through the management API server")
	if strings.Contains(err.Error(), "secret-token") {
		t.Errorf("the token leaked into an error: %v", err)
	}

	// The management cluster's CA verifies the API server: another CA is refused.
	other, err := servingcert.New("another-cluster")
	if err != nil {
		t.Fatal(err)
	}
	untrusted := &rest.Config{Host: apiserver.URL, TLSClientConfig: rest.TLSClientConfig{CAData: other.CAPEM}}
	_, err = newClient(t, Endpoint{Name: "svc-ext", Service: &Service{Namespace: "capi", Name: "ext"}, Proxy: untrusted}).Discover(t.Context())
	wantKind(t, err, KindConnection, "certificate")

	_, err = New(Endpoint{Name: "both", URL: "https://10.0.0.1", Service: &Service{Namespace: "capi", Name: "ext"}, Proxy: mgmt}, Options{})
	wantKind(t, err, KindConfig, "both a URL and a Service")
	_, err = New(Endpoint{Name: "no-proxy", Service: &Service{Namespace: "capi", Name: "ext"}}, Options{})
	wantKind(t, err, KindConfig, "no management cluster connection")
}

func TestHookPath(t *testing.T) {
	for hook, want := range map[string]string{
		HookDiscovery:        "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery",
		HookCanUpdateMachine: "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/h",
		HookUpdateMachine:    "/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/h",
	} {
		if got := HookPath(hook, "h"); got != want {
			t.Errorf("HookPath(%s) = %q, want %q", hook, got, want)
		}
	}
}
