package extension

import (
	"strings"
	"time"

	"k8s.io/client-go/rest"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"
)

// Handler is one handler an extension serves for a hook.
type Handler struct {
	// Name is the handler's name as the extension's Discovery answer gives it (the last
	// segment of its URL path).
	Name string
	// Timeout is the handler's own timeout, when it declared one (capped at MaxTimeout).
	Timeout time.Duration
	// FailurePolicy is "Fail" (the default) or "Ignore".
	FailurePolicy hooksv1.FailurePolicy
}

// HandlersFor lists the handlers of hook (for example HookCanUpdateMachine) in a Discovery
// answer, in the extension's order. Handlers of other hook versions are left out: this
// package speaks v1alpha1.
func HandlersFor(resp *hooksv1.DiscoveryResponse, hook string) []Handler {
	if resp == nil {
		return nil
	}
	var out []Handler
	for _, h := range resp.Handlers {
		if h.RequestHook.APIVersion != hooksGroupVersion || h.RequestHook.Hook != hook {
			continue
		}
		hd := Handler{Name: h.Name, FailurePolicy: hooksv1.FailurePolicyFail}
		if h.TimeoutSeconds != nil && *h.TimeoutSeconds > 0 {
			hd.Timeout = min(time.Duration(*h.TimeoutSeconds)*time.Second, MaxTimeout)
		}
		if h.FailurePolicy != nil {
			hd.FailurePolicy = *h.FailurePolicy
		}
		out = append(out, hd)
	}
	return out
}

// FromExtensionConfig is the endpoint of a CAPI ExtensionConfig: its spec.clientConfig.url, or
// its spec.clientConfig.service called through the management API server's service proxy with
// proxy, the management cluster's REST config (see ProxyURL: the caBundle then verifies nothing,
// the API server makes the TLS connection, so it is left out).
func FromExtensionConfig(ec *runtimev1.ExtensionConfig, proxy *rest.Config) (Endpoint, error) {
	cc := ec.Spec.ClientConfig
	ep := Endpoint{Name: ec.Name, Settings: ec.Spec.Settings}
	switch {
	case cc.URL != nil && *cc.URL != "":
		ep.URL, ep.CABundle = *cc.URL, cc.CABundle
	case cc.Service != nil:
		svc := &Service{Namespace: cc.Service.Namespace, Name: cc.Service.Name}
		if cc.Service.Port != nil {
			svc.Port = *cc.Service.Port
		}
		if cc.Service.Path != nil {
			svc.Path = *cc.Service.Path
		}
		ep.Service, ep.Proxy = svc, proxy
	default:
		return ep, &Error{Extension: ec.Name, Kind: KindConfig, Detail: "ExtensionConfig has neither spec.clientConfig.url nor a service"}
	}
	return ep, nil
}

// HandlerName strips the ".<ExtensionConfig name>" suffix CAPI adds to the handler names it
// records in an ExtensionConfig's status, giving the name the extension serves.
func HandlerName(registered, extensionConfig string) string {
	return strings.TrimSuffix(registered, "."+extensionConfig)
}
