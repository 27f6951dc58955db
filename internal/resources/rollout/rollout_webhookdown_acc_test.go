package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/servingcert"
)

// webhookDownFor is how long the webhook's backend stays down once the canary's change first
// calls it.
const webhookDownFor = 20 * time.Second

// TestAccRollout_fluxContract_webhookUnavailable: a validating webhook of the canary (fail
// closed, for the app's ConfigMaps) whose backend is down for 20 s from the first call the
// canary's change makes (every call fails: the connection is closed before TLS, so the API server
// answers InternalError, "failed calling webhook"). That is no verdict on the revision: through
// Flux kustomize-controller's dry-run fails with InternalError and retries every retryInterval
// within verify.timeout, and the apply completes once the webhook answers again, or ends
// unsettled; it is never written to the ledger, and the revision is not refused by the next plan,
// whose apply converges.
func TestAccRollout_fluxContract_webhookUnavailable(t *testing.T) {
	testWebhookUnavailable(t, fluxEngine)
}

// TestAccRollout_webhookUnavailable: the same delivering directly, where the provider's own
// server-side apply meets the webhook's failure (InternalError: infrastructure, not the
// revision's).
func TestAccRollout_webhookUnavailable(t *testing.T) {
	acctest.OnOneLane(t, 0) // what an unreachable webhook is, not how a CLI drives the provider
	testWebhookUnavailable(t, directEngine)
}

func testWebhookUnavailable(t *testing.T, e engineUnderTest) {
	f := e.fleet(t)
	tf := newCLIRun(t)
	name := acctest.UniqueLabel("hookdown")
	const canary = "prod-eu-1"
	clusters := []string{"prod-eu-1", "prod-us-1", "staging-eu-1"}
	key := records.Key{Kind: "rollout", Namespace: f.Namespace, Name: name}
	v1, v2 := app(name, "v1", false, ""), app(name, "v2", false, "")
	rev2 := e.revision(t, f, name, v2)
	config := func(manifests string) string {
		return strings.Replace(e.withDeliveryHCL(f, name, interruptConfig(f, name, manifests)),
			`update_limit = "1"`, "update_limit = \"1\"\n  canary = [\""+canary+"\"]", 1)
	}
	t.Cleanup(func() {
		if res := tf.run(context.Background(), "destroy", "-auto-approve"); res.code != 0 {
			t.Errorf("cleanup: destroy exited %d:\n%s", res.code, res.output)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tf.writeConfig(config(v1))
	tf.mustRun(ctx, 0, "apply", "-auto-approve")

	// The webhook goes in after the plan (delivering directly, the plan's drift check would meet
	// it and leave the canary unread): the saved plan's apply is what meets it.
	tf.writeConfig(config(v2))
	tf.mustRun(ctx, 0, "plan", "-out=v2.tfplan")
	hook := startFlakyWebhook(t, webhookDownFor)
	hook.register(t, workloadClient(t, f, canary), name)
	start := time.Now()
	res := tf.run(ctx, "apply", "v2.tfplan")
	t.Logf("the apply with the webhook down %s exited %d after %s (webhook: %d calls refused while down, %d answered):\n%s",
		webhookDownFor, res.code, time.Since(start).Round(time.Second), hook.refused.Load(), hook.answered.Load(), res.output)
	// The fault happened during the canary's change: calls failed, then the webhook answered.
	if hook.refused.Load() == 0 {
		t.Fatal("the webhook was never called while down: the test did not exercise the fault")
	}
	if res.code != 0 && regexp.MustCompile(`Rollout Failed|Recorded Invalid|invalid`).MatchString(res.output) && !strings.Contains(res.output, "nsettled") {
		t.Errorf("a webhook that could not be reached was taken for the revision's failure:\n%s", res.output)
	}
	if ledger := ledgerOf(t, f, name); len(ledger) != 0 {
		t.Fatalf("ledger %+v: an unreachable webhook is not the revision's failure", ledger)
	}
	if res.code != 0 {
		// Ended unsettled: the next plan offers the revision again (not refused), and its
		// apply, the webhook answering now, takes it everywhere.
		if hook.answered.Load() == 0 {
			hook.forceUp()
		}
		out := tf.mustRun(ctx, 2, "plan", "-detailed-exitcode")
		if strings.Contains(out, "Recorded Invalid") {
			t.Fatalf("the next plan refuses the revision:\n%s", out)
		}
		tf.mustRun(ctx, 0, "apply", "-auto-approve")
	}
	if hook.answered.Load() == 0 {
		t.Error("the revision went out without the webhook ever admitting the canary's change")
	}
	if err := expectDeployment(f, clusters, name, "v2", true); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		st, err := e.records(t, f, c, records.DefaultNamespace, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Provisioning != nil || st.Current == nil || st.Current.Revision != rev2 || len(st.Invalid) > 0 {
			t.Errorf("%s: records %+v, want current %s, nothing in flight, nothing invalid", c, st, rev2)
		}
	}
	if ledger := ledgerOf(t, f, name); len(ledger) != 0 {
		t.Errorf("ledger %+v after the webhook came back: want empty", ledger)
	}
	tf.mustRun(ctx, 0, "plan", "-detailed-exitcode")
}

// flakyWebhook is a validating webhook's backend on the loopback address that is down (closes
// every connection before TLS) for downFor from the first call, and then admits everything.
type flakyWebhook struct {
	pair              *servingcert.Pair
	url               string
	downFor           time.Duration
	mu                sync.Mutex
	firstCall         time.Time
	up                atomic.Bool
	refused, answered atomic.Int32
}

func startFlakyWebhook(t *testing.T, downFor time.Duration) *flakyWebhook {
	t.Helper()
	pair, err := servingcert.New("flaky-webhook")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &flakyWebhook{pair: pair, downFor: downFor, url: "https://" + ln.Addr().String() + "/validate"}
	srv := &http.Server{Handler: http.HandlerFunc(w.admit), TLSConfig: pair.ServerTLS(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ServeTLS(downListener{Listener: ln, w: w}, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("flaky webhook: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

// downListener closes the connections it accepts while the webhook is down.
type downListener struct {
	net.Listener
	w *flakyWebhook
}

func (l downListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.w.isUp() {
			return c, err
		}
		l.w.refused.Add(1)
		_ = c.Close()
	}
}

// isUp says whether the webhook answers: downFor after the first call (or once forced up).
func (w *flakyWebhook) isUp() bool {
	if w.up.Load() {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstCall.IsZero() {
		w.firstCall = time.Now()
	}
	if time.Since(w.firstCall) >= w.downFor {
		w.up.Store(true)
	}
	return w.up.Load()
}

func (w *flakyWebhook) forceUp() { w.up.Store(true) }

// admit allows every AdmissionReview.
func (w *flakyWebhook) admit(rw http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.answered.Add(1)
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{
		"apiVersion": review.APIVersion, "kind": review.Kind,
		"response": map[string]any{"uid": review.Request.UID, "allowed": true},
	})
}

// register puts the webhook's configuration in the cluster c reaches, fail closed for the
// ConfigMaps of namespace ns alone (the other tests sharing the bed are not affected), and
// deletes it at cleanup.
func (w *flakyWebhook) register(t *testing.T, c client.Client, ns string) {
	t.Helper()
	fail, none, timeout := admissionv1.Fail, admissionv1.SideEffectClassNone, int32(5)
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-flaky"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "flaky." + ns + ".example.com",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &w.url, CABundle: w.pair.CAPEM},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns},
			}}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
		}},
	}
	if err := c.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), cfg); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete webhook configuration %s: %v", cfg.Name, err)
		}
	})
}
