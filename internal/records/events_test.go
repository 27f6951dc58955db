package records

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestEvent: an Event is about the management record, bounded in size, and not written once the
// run's Lease may be lost (a fenced context).
func TestEvent(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(nil)
	s := NewManagementStore(c, "gradual-system")
	key := Key{Kind: "rollout", Namespace: "fleet", Name: "web"}
	long := strings.Repeat("é", maxEventMessage)
	if err := s.Event(ctx, key, true, EventReasonWaveDone, long); err != nil {
		t.Fatal(err)
	}
	lost := WithFence(ctx, func() error { return ErrLeaseLost })
	if err := s.Event(lost, key, false, EventReasonSucceeded, "late"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a fenced Event returned %v, want ErrLeaseLost", err)
	}
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace("gradual-system")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d events, want the first only (the fenced one is not written)", len(list.Items))
	}
	ev := list.Items[0]
	if ev.Type != corev1.EventTypeWarning || ev.Reason != EventReasonWaveDone || ev.InvolvedObject.Name != key.ObjectName() || ev.InvolvedObject.Kind != "Secret" {
		t.Errorf("event %s %s about %+v, want a Warning WaveDone about Secret %s", ev.Type, ev.Reason, ev.InvolvedObject, key.ObjectName())
	}
	if len(ev.Message) > maxEventMessage || !utf8.ValidString(ev.Message) || !strings.HasSuffix(ev.Message, "(truncated)") {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d, cut on a character and marked", len(ev.Message), utf8.ValidString(ev.Message), maxEventMessage)
	}
}
