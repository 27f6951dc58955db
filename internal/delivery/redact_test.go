package delivery

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
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
	got := redact(err, []string{"hunter2", "hunter2-long", ""})
	if msg := got.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, redactedText) || !strings.Contains(msg, "data.password") {
		t.Errorf("redacted message: %s", msg)
	}
	if revisionClass(got) != engine.ErrRevisionFailed {
		t.Errorf("class lost: %v", revisionClass(got))
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
	if redact(err, []string{"other"}) != error(err) || redact(err, nil) != error(err) || redact(nil, []string{"x"}) != nil {
		t.Error("redact changed an error it had nothing to hide in")
	}
}
