package delivery_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/delivery"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/resources/ignoreattr"
)

// An API server refusing an object may quote the value it refused: the message must not repeat
// a sensitive value, and the error must keep its class (a refused object is the revision's fault).
func TestRedactKeepsTheClassAndHidesTheValue(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "db",
		field.ErrorList{field.Invalid(field.NewPath("data", "password"), "hunter2-long", "too long")})
	err := &apply.ObjectError{Object: apply.ObjectRef{Kind: "ConfigMap", Namespace: "app", Name: "db"}, Op: "apply", Err: invalid}
	if !strings.Contains(err.Error(), "hunter2-long") {
		t.Fatalf("the fake does not echo the value, so the test proves nothing: %v", err)
	}
	got := delivery.Redact(err, []string{"hunter2", "hunter2-long", ""})
	if msg := got.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, delivery.RedactedText) || !strings.Contains(msg, "data.password") {
		t.Errorf("redacted message: %s", msg)
	}
	if delivery.RevisionClass(got) != engine.ErrRevisionFailed {
		t.Errorf("class lost: %v", delivery.RevisionClass(got))
	}
	var oe *apply.ObjectError
	if !errors.As(got, &oe) || oe.Object.Name != "db" {
		t.Error("the original error is not reachable")
	}
	// Marked by the engine (as classify does), it still says no more.
	if msg := engine.Mark(engine.ErrRevisionFailed, got).Error(); strings.Contains(msg, "hunter2") {
		t.Errorf("marked: %s", msg)
	}
	// Nothing to hide: the error itself.
	if delivery.Redact(err, []string{"other"}) != error(err) || delivery.Redact(err, nil) != error(err) || delivery.Redact(nil, []string{"x"}) != nil {
		t.Error("redact changed an error it had nothing to hide in")
	}
}

// The sensitive half of a rollout: a Secret the public half's Deployment uses.
const (
	redactPublic = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
spec: {replicas: 2}
`
	redactSensitive = `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: app}
stringData: {password: s3cr3t-Passw0rd}
data: {token: dG9rZW4tZnJvbS1kYXRh}
`
)

// redactList is Spec.Redact as the rollout builds it (rollout_model.go): the values of the
// sensitive half, by ignoreattr.SensitiveValues, without any sensitive_paths rule.
func redactList(t *testing.T) []string {
	t.Helper()
	set, err := manifest.Bundle(redactPublic, redactSensitive)
	if err != nil {
		t.Fatal(err)
	}
	_, hidden := set.Halves(redactPublic)
	return ignoreattr.SensitiveValues(hidden, nil)
}

// denial is how an API server reports an admission policy refusing an object: the policy's
// message, which may quote what it read, whole.
func denial(code int32, reason metav1.StatusReason, message string) error {
	return &apply.ObjectError{Object: apply.ObjectRef{Version: "v1", Kind: "Secret", Namespace: "app", Name: "db"}, Op: "apply",
		Err: &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message}}}
}

// checkRedacted wants got, original redacted, to say original's message without secret, and to
// keep its class.
func checkRedacted(t *testing.T, original, got error, secret string) {
	t.Helper()
	msg := got.Error()
	if !strings.Contains(original.Error(), secret) {
		t.Fatalf("the denial does not quote %q, so the test proves nothing: %v", secret, original)
	}
	if strings.Contains(msg, secret) || !strings.Contains(msg, delivery.RedactedText) || !strings.Contains(msg, "denied") {
		t.Errorf("redacted message: %s", msg)
	}
	// What the ledger keeps and classify decides on: the message is hidden, the class is not.
	if delivery.RevisionClass(got) != engine.ErrRevisionFailed {
		t.Errorf("class lost: %v", delivery.RevisionClass(got))
	}
	marked := engine.Mark(delivery.RevisionClass(got), got)
	if !errors.Is(marked, engine.ErrRevisionFailed) || strings.Contains(marked.Error(), secret) {
		t.Errorf("marked: %v", marked)
	}
	var status apierrors.APIStatus
	if !errors.As(got, &status) || !errors.Is(got, errors.Unwrap(original)) {
		t.Error("the original error is not reachable")
	}
}

func TestRedactSecretStringDataQuotedRawByAPolicy(t *testing.T) {
	err := denial(http.StatusForbidden, metav1.StatusReasonForbidden,
		`admission webhook "secrets.policy.example.com" denied the request: password "s3cr3t-Passw0rd" is on the list of breached passwords`)
	checkRedacted(t, err, delivery.Redact(err, redactList(t)), "s3cr3t-Passw0rd")
}

func TestRedactSecretStringDataQuotedBase64ByAPolicy(t *testing.T) {
	encoded := base64.StdEncoding.EncodeToString([]byte("s3cr3t-Passw0rd"))
	err := denial(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`ValidatingAdmissionPolicy 'no-weak-secrets' with binding 'all' denied request: object.data.password `+encoded+` is too weak`)
	checkRedacted(t, err, delivery.Redact(err, redactList(t)), encoded)
}

func TestRedactSecretDataQuotedDecodedByAPolicy(t *testing.T) {
	err := denial(http.StatusForbidden, metav1.StatusReasonForbidden,
		`admission webhook "secrets.policy.example.com" denied the request: token token-from-data must not be reused`)
	got := delivery.Redact(err, redactList(t))
	checkRedacted(t, err, got, "token-from-data")
	// The field's name stays readable: short words are never replaced.
	if !strings.Contains(got.Error(), "denied the request: token (sensitive value) must not") {
		t.Errorf("message: %s", got)
	}
}

func TestRedactLeavesAMessageWithNothingSensitive(t *testing.T) {
	err := denial(http.StatusForbidden, metav1.StatusReasonForbidden,
		`admission webhook "secrets.policy.example.com" denied the request: Secret app/db must carry the label team`)
	if got := delivery.Redact(err, redactList(t)); got != err {
		t.Errorf("redact changed an error it had nothing to hide in: %v", got)
	}
	// Values too short to replace are not replaced.
	if got := delivery.Redact(err, []string{"app", "db", " db \n", ""}); got != err {
		t.Errorf("short values replaced: %v", got)
	}
}

func TestRedactCoversOverlappingValuesWhole(t *testing.T) {
	err := errors.New(`denied: "abcdSECRET-LONG-VALUE" and "SECRET-LONG" again`)
	got := delivery.Redact(err, []string{"SECRET-LONG", "abcdSECR", "SECRET-LONG-VALUE"}).Error()
	if want := `denied: "(sensitive value)" and "(sensitive value)" again`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The replacement text is not searched in turn.
	if got := delivery.Redact(errors.New("x hunter2 y"), []string{"hunter2", "sensitive value"}).Error(); got != "x (sensitive value) y" {
		t.Errorf("got %s", got)
	}
}
