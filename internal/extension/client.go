package extension

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// Limits of a call. The defaults are what an Endpoint gets when it leaves a setting zero.
const (
	// DefaultTimeout bounds one call (all its attempts), as CAPI's default handler timeout.
	DefaultTimeout = hooksv1.DefaultHandlersTimeoutSeconds * time.Second
	// MaxTimeout is the longest timeout an Endpoint may ask for.
	MaxTimeout = 30 * time.Second
	// DefaultMaxResponseBytes caps a response body; a larger one is an error, not truncated JSON.
	DefaultMaxResponseBytes = 1 << 20
	// DefaultRetries is how many times a call is retried after a 5xx or a connection error.
	DefaultRetries = 2
	// DefaultMaxRetryWait caps every wait between attempts, Retry-After included.
	DefaultMaxRetryWait = 2 * time.Second
	// DefaultMaxRetryAfter caps the retryAfterSeconds an UpdateMachine answer asks for (RetryAfter).
	DefaultMaxRetryAfter = 30 * time.Second
	// MaxMessageLen is how much of an extension's message or body an error quotes.
	MaxMessageLen = 256
)

// Hook paths, as CAPI's runtime catalog derives them from the hook's group, version and name.
const (
	hooksGroupVersion = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
	// HookDiscovery, HookCanUpdateMachine and HookUpdateMachine are the hook names of the
	// handlers this package calls, as they appear in a DiscoveryResponse.
	HookDiscovery           = "Discovery"
	HookCanUpdateMachine    = "CanUpdateMachine"
	HookCanUpdateMachineSet = "CanUpdateMachineSet"
	HookUpdateMachine       = "UpdateMachine"
)

// Endpoint says where an extension is and how far to trust it.
type Endpoint struct {
	// Name identifies the extension in errors (an ExtensionConfig name, or the name the user
	// gave it).
	Name string
	// URL is the extension's base URL, https://host[:port][/path]; a path is a prefix of the
	// hook paths. No user info, query or fragment.
	URL string
	// CABundle is the PEM bundle that verifies the server's certificate; empty means the
	// system roots.
	CABundle []byte
	// Timeout bounds one call including its retries: 0 means DefaultTimeout; more than
	// MaxTimeout is refused.
	Timeout time.Duration
	// AllowInsecureLoopback permits an http:// URL whose host is a loopback address
	// (for tests and local development); https stays the only choice for anything else.
	AllowInsecureLoopback bool
	// Settings are sent with every hook request (ExtensionConfig spec.settings).
	Settings map[string]string
	// Service, instead of URL, names an extension installed behind a Service of the management
	// cluster (ExtensionConfig spec.clientConfig.service): it is called through the management
	// API server's service proxy with Proxy (see ProxyURL for what is verified there).
	Service *Service
	// Proxy is the management cluster's REST config (the provider's own connection: its host,
	// CA and credentials), which calls to a Service go through; unused with a URL.
	Proxy *rest.Config
}

// Service is an extension installed behind a Service of the management cluster, as an
// ExtensionConfig's spec.clientConfig.service names it.
type Service struct {
	Namespace, Name string
	// Port is the Service's port; 0 means 443, Cluster API's default.
	Port int32
	// Path prefixes the hook paths, as a URL's path does.
	Path string
}

// DefaultServicePort is the port Cluster API calls a Service on when its ExtensionConfig gives
// none (it then calls https://<name>.<namespace>.svc).
const DefaultServicePort = 443

func (s Service) port() int32 {
	if s.Port == 0 {
		return DefaultServicePort
	}
	return s.Port
}

// InClusterURL is the URL Cluster API's runtime client calls for the Service from inside the
// management cluster (urlForExtension in sigs.k8s.io/cluster-api internal/runtime/client):
// always https, host <name>.<namespace>.svc, the port, the path. Errors show it.
func (s Service) InClusterURL() string {
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(s.Name+"."+s.Namespace+".svc", strconv.Itoa(int(s.port()))), Path: s.Path}
	return u.String()
}

// ProxyURL is the base URL, on the management API server whose REST config is cfg, that reaches
// the Service's extension: <host>/api/v1/namespaces/<namespace>/services/https:<name>:<port>/proxy<path>.
// The hook paths are appended to it as to an extension's URL.
//
// What is verified on this path differs from a direct call, and from Cluster API's own calls:
//   - The connection to the API server is verified and authenticated as every other call of
//     the provider is (cfg's CA, credentials and proxy settings). The API server then checks
//     that those credentials may create services/proxy in the namespace (RBAC).
//   - The API server, not this client, makes the TLS connection to the extension (the "https:"
//     in the proxy path), to a ready address of the Service's Endpoints that names a Pod with
//     that IP (kube-apiserver's service proxy goes nowhere else). kube-apiserver's proxy
//     transport does not verify that certificate at all (it dials endpoint IPs, so it sets
//     InsecureSkipVerify), and it presents no client certificate. So the ExtensionConfig's
//     caBundle verifies nothing on this path: it is not used. Cluster API's runtime client,
//     calling from inside the cluster, verifies the certificate against caBundle for the host
//     <name>.<namespace>.svc; the preview cannot, and trusts the API server and the cluster's
//     network for the last hop. An extension that requires client certificates refuses the
//     proxied call.
//   - The API server refuses to proxy to loopback and link-local endpoint addresses.
func ProxyURL(cfg *rest.Config, s Service) (*url.URL, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, errors.New("no management cluster connection to reach the Service through")
	}
	for what, v := range map[string]string{"namespace": s.Namespace, "name": s.Name} {
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return nil, fmt.Errorf("service %s %q is not a DNS label: %s", what, v, strings.Join(errs, "; "))
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		return nil, fmt.Errorf("service port %d is out of range", s.Port)
	}
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("management API server URL: %w", err)
	}
	u := *host
	u.RawQuery, u.Fragment, u.User = "", "", nil
	// path.Clean of an absolute path drops any "..": the path stays under the Service's proxy.
	u.Path = path.Join("/", host.Path, "api/v1/namespaces", s.Namespace, "services",
		"https:"+s.Name+":"+strconv.Itoa(int(s.port())), "proxy", path.Clean("/"+s.Path))
	u.RawPath = ""
	return &u, nil
}

// Options tune the client; the zero value is the defaults above.
type Options struct {
	// Retries after a 5xx or a connection error; 0 means DefaultRetries, negative means none.
	Retries int
	// MinRetryWait and MaxRetryWait bound the exponential wait between attempts; a
	// Retry-After header is honoured up to MaxRetryWait. Defaults 200 ms and DefaultMaxRetryWait.
	MinRetryWait, MaxRetryWait time.Duration
	// MaxRetryAfter caps RetryAfter; default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// MaxResponseBytes caps a response body; default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Logger receives retryablehttp's request and retry lines; nil logs nothing.
	Logger retryablehttp.LeveledLogger
}

// Client calls one extension endpoint. It is safe for concurrent use.
type Client struct {
	ep      Endpoint
	base    *url.URL
	display string // the URL errors show
	timeout time.Duration
	opts    Options
	http    *retryablehttp.Client
}

// New checks ep and builds its client. Nothing is sent until a hook is called.
func New(ep Endpoint, opts Options) (*Client, error) {
	c := &Client{ep: ep, opts: opts.withDefaults()}
	fail := func(kind Kind, format string, args ...any) (*Client, error) {
		shown := ep.URL
		if c.display != "" {
			shown = c.display
		}
		return nil, &Error{Extension: ep.Name, URL: shown, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case ep.Timeout < 0:
		return fail(KindConfig, "timeout %s is negative", ep.Timeout)
	case ep.Timeout > MaxTimeout:
		return fail(KindConfig, "timeout %s is longer than the %s allowed", ep.Timeout, MaxTimeout)
	case ep.Timeout == 0:
		c.timeout = DefaultTimeout
	default:
		c.timeout = ep.Timeout
	}
	if ep.Service != nil {
		return newProxied(c, fail)
	}
	u, err := url.Parse(ep.URL)
	if err != nil {
		return fail(KindConfig, "URL does not parse: %v", err)
	}
	switch {
	case u.Host == "":
		return fail(KindConfig, "URL has no host")
	case u.User != nil:
		return fail(KindConfig, "URL must not carry user info")
	case u.RawQuery != "" || u.Fragment != "":
		return fail(KindConfig, "URL must not have a query or a fragment")
	case u.Scheme == "https":
	case u.Scheme == "http" && ep.AllowInsecureLoopback && isLoopback(u.Hostname()):
	case u.Scheme == "http" && ep.AllowInsecureLoopback:
		return fail(KindInsecureURL, "plain HTTP is allowed only to a loopback address, not %s; use https with a CA bundle", u.Hostname())
	case u.Scheme == "http":
		return fail(KindInsecureURL, "plain HTTP is refused; use https with a CA bundle")
	default:
		return fail(KindConfig, "URL scheme %q is not https", u.Scheme)
	}
	c.base = u

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(ep.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ep.CABundle) {
			return fail(KindConfig, "the CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	c.display = ep.URL
	return c.withTransport(&http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   5 * time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}), nil
}

// newProxied is New for an endpoint with a Service: calls go through the management API
// server's service proxy (ProxyURL), over client-go's transport for the management cluster.
func newProxied(c *Client, fail func(Kind, string, ...any) (*Client, error)) (*Client, error) {
	ep := c.ep
	c.display = ep.Service.InClusterURL() + " through the management API server's service proxy"
	if ep.URL != "" {
		return fail(KindConfig, "both a URL and a Service are given; an extension has one")
	}
	base, err := ProxyURL(ep.Proxy, *ep.Service)
	if err != nil {
		return fail(KindConfig, "%v", err)
	}
	transport, err := rest.TransportFor(ep.Proxy)
	if err != nil {
		return fail(KindConfig, "management cluster transport: %v", err)
	}
	c.base = base
	return c.withTransport(transport), nil
}

// withTransport finishes c with the retrying HTTP client over transport.
func (c *Client) withTransport(transport http.RoundTripper) *Client {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{
		Transport: transport,
		// A redirect could send the request (machine specs included) anywhere: answer with
		// the 3xx itself, which do() turns into an error.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	rc.Logger = nil
	if c.opts.Logger != nil {
		rc.Logger = c.opts.Logger
	}
	rc.RetryMax = max(c.opts.Retries, 0)
	rc.RetryWaitMin, rc.RetryWaitMax = c.opts.MinRetryWait, c.opts.MaxRetryWait
	rc.Backoff = cappedBackoff
	rc.CheckRetry = retryablehttp.DefaultRetryPolicy
	// Hand the last response back as is, so do() can quote its status and message.
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	c.http = rc
	return c
}

func (o Options) withDefaults() Options {
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.MinRetryWait <= 0 {
		o.MinRetryWait = 200 * time.Millisecond
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	o.MinRetryWait = min(o.MinRetryWait, o.MaxRetryWait)
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return o
}

// cappedBackoff is retryablehttp's exponential backoff, with a Retry-After header honoured
// but never beyond maxWait: an extension cannot park a call for longer than we allow.
func cappedBackoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, maxWait)
		}
	}
	wait := float64(minWait) * math.Pow(2, float64(attempt))
	if wait > float64(maxWait) {
		return maxWait
	}
	return time.Duration(wait)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Name is the endpoint's name, as errors show it.
func (c *Client) Name() string { return c.ep.Name }

// Timeout is the bound of one call.
func (c *Client) Timeout() time.Duration { return c.timeout }

// HookPath is the path CAPI's runtime client calls for a handler of a v1alpha1 hook, relative
// to the extension's base URL; the Discovery hook has no handler name.
func HookPath(hook, handler string) string {
	if hook == HookDiscovery {
		return "/" + hooksGroupVersion + "/discovery"
	}
	return "/" + path.Join(hooksGroupVersion, strings.ToLower(hook), handler)
}

// Discover calls the extension's Discovery hook and returns the handlers it serves.
func (c *Client) Discover(ctx context.Context) (*hooksv1.DiscoveryResponse, error) {
	req := &hooksv1.DiscoveryRequest{}
	req.APIVersion, req.Kind = hooksGroupVersion, "DiscoveryRequest"
	resp := &hooksv1.DiscoveryResponse{}
	if err := c.call(ctx, HookDiscovery, "", req, resp, &resp.CommonResponse); err != nil {
		return nil, err
	}
	for i, h := range resp.Handlers {
		if h.Name == "" || h.RequestHook.Hook == "" {
			return nil, c.errorf(HookDiscovery, "", KindMalformed, 0, "handler %d has no name or no hook", i)
		}
	}
	return resp, nil
}

// CanUpdateMachine asks handler which of the changes from req.Current to req.Desired the
// extension can make in place. A Failure answer is an *Error of KindFailure.
func (c *Client) CanUpdateMachine(ctx context.Context, handler string, req *hooksv1.CanUpdateMachineRequest) (*hooksv1.CanUpdateMachineResponse, error) {
	req.APIVersion, req.Kind = hooksGroupVersion, "CanUpdateMachineRequest"
	req.Settings = c.settings(req.Settings)
	resp := &hooksv1.CanUpdateMachineResponse{}
	if err := c.call(ctx, HookCanUpdateMachine, handler, req, resp, &resp.CommonResponse); err != nil {
		return nil, err
	}
	if err := c.checkPatchTypes(HookCanUpdateMachine, handler, resp.MachinePatch, resp.InfrastructureMachinePatch, resp.BootstrapConfigPatch); err != nil {
		return nil, err
	}
	return resp, nil
}

// CanUpdateMachineSet asks handler which of the changes from req.Current to req.Desired (a
// MachineSet and its templates, as a MachineDeployment's rollout would change them) the
// extension can make in place. A Failure answer is an *Error of KindFailure.
func (c *Client) CanUpdateMachineSet(ctx context.Context, handler string, req *hooksv1.CanUpdateMachineSetRequest) (*hooksv1.CanUpdateMachineSetResponse, error) {
	req.APIVersion, req.Kind = hooksGroupVersion, "CanUpdateMachineSetRequest"
	req.Settings = c.settings(req.Settings)
	resp := &hooksv1.CanUpdateMachineSetResponse{}
	if err := c.call(ctx, HookCanUpdateMachineSet, handler, req, resp, &resp.CommonResponse); err != nil {
		return nil, err
	}
	if err := c.checkPatchTypes(HookCanUpdateMachineSet, handler, resp.MachineSetPatch, resp.InfrastructureMachineTemplatePatch, resp.BootstrapConfigTemplatePatch); err != nil {
		return nil, err
	}
	return resp, nil
}

// checkPatchTypes refuses an answer with a patch of a type CAPI cannot apply: only JSON patches
// and JSON merge patches are (an undefined patch is no patch).
func (c *Client) checkPatchTypes(hook, handler string, patches ...hooksv1.Patch) error {
	for _, p := range patches {
		if p.IsDefined() && p.PatchType != hooksv1.JSONPatchType && p.PatchType != hooksv1.JSONMergePatchType {
			return c.errorf(hook, handler, KindMalformed, 0, "patch type %q is neither %s nor %s",
				truncate(string(p.PatchType)), hooksv1.JSONPatchType, hooksv1.JSONMergePatchType)
		}
	}
	return nil
}

// UpdateMachine asks handler to update the machine towards req.Desired. The answer says the
// update is in progress (RetryAfterSeconds > 0: call again after RetryAfter) or done; a Failure
// answer is an *Error of KindFailure carrying the extension's (truncated) message.
func (c *Client) UpdateMachine(ctx context.Context, handler string, req *hooksv1.UpdateMachineRequest) (*hooksv1.UpdateMachineResponse, error) {
	req.APIVersion, req.Kind = hooksGroupVersion, "UpdateMachineRequest"
	req.Settings = c.settings(req.Settings)
	resp := &hooksv1.UpdateMachineResponse{}
	if err := c.call(ctx, HookUpdateMachine, handler, req, resp, &resp.CommonResponse); err != nil {
		return nil, err
	}
	if resp.RetryAfterSeconds < 0 {
		return nil, c.errorf(HookUpdateMachine, handler, KindMalformed, 0, "retryAfterSeconds %d is negative", resp.RetryAfterSeconds)
	}
	return resp, nil
}

// RetryAfter is how long to wait before calling UpdateMachine again after resp: its
// retryAfterSeconds, capped by Options.MaxRetryAfter; 0 means the update is done.
func (c *Client) RetryAfter(resp *hooksv1.UpdateMachineResponse) time.Duration {
	if resp == nil || resp.RetryAfterSeconds <= 0 {
		return 0
	}
	return min(time.Duration(resp.RetryAfterSeconds)*time.Second, c.opts.MaxRetryAfter)
}

func (c *Client) settings(given map[string]string) map[string]string {
	if given != nil || len(c.ep.Settings) == 0 {
		return given
	}
	return c.ep.Settings
}

// call POSTs req to the hook's path and decodes a 200 answer into resp; common is resp's
// status and message, checked here for every hook.
func (c *Client) call(ctx context.Context, hook, handler string, req, resp any, common *hooksv1.CommonResponse) error {
	body, err := json.Marshal(req)
	if err != nil {
		return c.errorf(hook, handler, KindConfig, 0, "encode request: %v", err)
	}
	u := *c.base
	u.Path = path.Join("/", c.base.Path, HookPath(hook, handler))
	// CAPI's client tells the extension how long it will wait.
	u.RawQuery = url.Values{"timeout": {c.timeout.String()}}.Encode()

	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := retryablehttp.NewRequestWithContext(callCtx, http.MethodPost, u.String(), body)
	if err != nil {
		return c.errorf(hook, handler, KindConfig, 0, "build request: %v", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	res, err := c.http.Do(hr)
	if err != nil {
		if res != nil {
			res.Body.Close()
		}
		switch {
		case ctx.Err() != nil:
			return c.errorf(hook, handler, KindCancelled, 0, "call cancelled: %v", context.Cause(ctx))
		case callCtx.Err() != nil:
			return c.errorf(hook, handler, KindTimeout, 0, "no answer within the %s timeout", c.timeout)
		default:
			return c.errorf(hook, handler, KindConnection, 0, "%s", describeTransportError(err))
		}
	}
	defer res.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(res.Body, c.opts.MaxResponseBytes+1))
	switch {
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return c.errorf(hook, handler, KindRedirect, res.StatusCode, "answered with a redirect (HTTP %d to %q); redirects are not followed: configure the final URL",
			res.StatusCode, truncate(res.Header.Get("Location")))
	case res.StatusCode != http.StatusOK:
		return c.errorf(hook, handler, KindStatus, res.StatusCode, "answered HTTP %d: %s", res.StatusCode, quoteBody(raw))
	case readErr != nil:
		if callCtx.Err() != nil && ctx.Err() == nil {
			return c.errorf(hook, handler, KindTimeout, 0, "answer not read within the %s timeout", c.timeout)
		}
		return c.errorf(hook, handler, KindConnection, 0, "read answer: %v", readErr)
	case int64(len(raw)) > c.opts.MaxResponseBytes:
		return c.errorf(hook, handler, KindTooLarge, res.StatusCode, "answer is larger than %d bytes", c.opts.MaxResponseBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(resp); err != nil {
		return c.errorf(hook, handler, KindMalformed, res.StatusCode, "answer is not a %sResponse: %v (body %s)", hook, err, quoteBody(raw))
	}
	if dec.More() {
		return c.errorf(hook, handler, KindMalformed, res.StatusCode, "answer has data after the JSON object (body %s)", quoteBody(raw))
	}
	switch common.Status {
	case hooksv1.ResponseStatusSuccess:
		return nil
	case hooksv1.ResponseStatusFailure:
		e := c.errorf(hook, handler, KindFailure, res.StatusCode, "answered Failure: %s", orNone(common.Message))
		e.Message = truncate(common.Message)
		return e
	default:
		return c.errorf(hook, handler, KindMalformed, res.StatusCode, "answer has status %q, want %s or %s",
			truncate(string(common.Status)), hooksv1.ResponseStatusSuccess, hooksv1.ResponseStatusFailure)
	}
}

func (c *Client) errorf(hook, handler string, kind Kind, status int, format string, args ...any) *Error {
	return &Error{
		Extension: c.ep.Name, Hook: hook, Handler: handler, URL: c.display,
		Kind: kind, StatusCode: status, Detail: fmt.Sprintf(format, args...),
	}
}

// describeTransportError names the usual causes plainly; retryablehttp wraps them deeply.
func describeTransportError(err error) string {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownAuthority):
		return "server certificate is not signed by the CA bundle (" + err.Error() + ")"
	case errors.As(err, &hostname):
		return "server certificate does not match the host (" + err.Error() + ")"
	case errors.As(err, &certInvalid):
		return "server certificate is invalid (" + err.Error() + ")"
	}
	return truncate(err.Error())
}

func quoteBody(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "(empty body)"
	}
	return strconv.Quote(truncate(string(raw)))
}

func orNone(msg string) string {
	if msg == "" {
		return "(no message)"
	}
	return strconv.Quote(truncate(msg))
}

// truncate shortens what an extension wrote to MaxMessageLen bytes (on a rune boundary),
// saying how much was left out.
func truncate(s string) string {
	if len(s) <= MaxMessageLen {
		return s
	}
	cut := MaxMessageLen
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
