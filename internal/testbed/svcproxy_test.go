package testbed

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Only <name>.<namespace>.svc:<port>, the host Cluster API's runtime client builds for a
// Service, is accepted.
func TestParseServiceHost(t *testing.T) {
	ns, name, port, err := ParseServiceHost("capi-test-extension.capi.svc:443")
	if err != nil || ns != "capi" || name != "capi-test-extension" || port != 443 {
		t.Errorf("got %s/%s:%d, %v", ns, name, port, err)
	}
	for _, bad := range []string{"example.com:443", "a.b.svc.cluster.local:443", "127.0.0.1:443", "a.b.svc:0", "a.b.svc:99999",
		"A.b.svc:443", "a.b.svc", ".b.svc:443", "a.b.c.svc:443"} {
		if _, _, _, err := ParseServiceHost(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// The endpoint is the first ready one of a slice that serves the Service port's name, at the
// slice's port; a nil ready condition reads as ready (EndpointSlice semantics).
func TestReadyEndpoint(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "metrics", Port: 8080}, {Name: "https", Port: 443}}}}
	slice := func(port string, target int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To(target)}}, Endpoints: eps}
	}
	ep := func(ip string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	got, err := ReadyEndpoint(svc, []discoveryv1.EndpointSlice{
		slice("metrics", 9000, ep("10.0.0.9", nil)),
		slice("https", 9443, ep("10.0.0.1", ptr.To(false)), ep("10.0.0.2", nil)),
	}, 443)
	if err != nil || got != "10.0.0.2:9443" {
		t.Errorf("got %q, %v; want 10.0.0.2:9443", got, err)
	}
	if _, err := ReadyEndpoint(svc, []discoveryv1.EndpointSlice{slice("https", 9443, ep("10.0.0.1", ptr.To(false)))}, 443); err == nil ||
		!strings.Contains(err.Error(), "no ready endpoint") {
		t.Errorf("no ready endpoint: %v", err)
	}
	if _, err := ReadyEndpoint(svc, nil, 444); err == nil || !strings.Contains(err.Error(), "no port 444") {
		t.Errorf("unknown port: %v", err)
	}
}

// A CONNECT to a Service host is tunnelled to the resolved endpoint, bytes both ways; a CONNECT
// to anything else is refused without resolving.
func TestSvcProxyTunnelsOnlyServices(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	var resolved []string
	p := &SvcProxy{Logf: t.Logf, Resolve: func(_ context.Context, ns, name string, port int32) (string, error) {
		resolved = append(resolved, ns+"/"+name)
		return echo.Addr().String(), nil
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	connect := func(host string) (*bufio.Reader, net.Conn, *http.Response) {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return r, c, resp
	}
	r, c, resp := connect("ext.ns.svc:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT to a Service: %s", resp.Status)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("through the tunnel: %q, %v", line, err)
	}
	_ = c.Close()

	_, c, resp = connect("example.com:443")
	_ = c.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT example.com: %s; want 403", resp.Status)
	}
	if len(resolved) != 1 || resolved[0] != "ns/ext" {
		t.Errorf("resolved %v; want only ns/ext", resolved)
	}
}
