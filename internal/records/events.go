package records

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event reasons a run writes on its management record, in order of a run: one WaveStarted and
// one WaveDone per wave, then how the run ended.
const (
	EventReasonWaveStarted  = "WaveStarted"
	EventReasonWaveDone     = "WaveDone"
	EventReasonSucceeded    = "RolloutSucceeded"
	EventReasonFailed       = "RolloutFailed"
	EventReasonInterrupted  = "RolloutInterrupted"
	eventReportingComponent = "terraform-provider-gradual"
	// maxEventMessage is the API server's limit on an Event's message.
	maxEventMessage = 1024
	// eventTimeout bounds one Event write: an Event is for whoever watches, never a reason to
	// hold the run.
	eventTimeout = 5 * time.Second
)

// Event writes a Kubernetes Event about the rollout's management record (the Secret
// key.ObjectName() in the store's namespace), so that a run can be followed from another
// terminal: `kubectl get events -n <record namespace> -w
// --field-selector involvedObject.name=<record>`. warning makes it a Warning rather than a
// Normal Event. Events are informational: a run that holds the Lease no more writes none (its
// context is fenced), and an Event that cannot be written is dropped (the error is returned for
// logging only).
func (s *ManagementStore) Event(ctx context.Context, key Key, warning bool, reason, message string) error {
	if err := Fenced(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	now := metav1.NewTime(s.now())
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if len(message) > maxEventMessage {
		message = truncateTo(message, maxEventMessage)
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      key.ObjectName() + "." + hex.EncodeToString(suffix),
			Namespace: s.namespace,
			Labels:    map[string]string{LabelManagedBy: ManagedBy},
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Secret", Namespace: s.namespace, Name: key.ObjectName(),
		},
		Reason:              reason,
		Message:             message,
		Type:                typ,
		Source:              corev1.EventSource{Component: eventReportingComponent},
		ReportingController: "gradual.dev/" + eventReportingComponent,
		ReportingInstance:   HolderIdentity(),
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	return s.c.Create(ctx, ev)
}

// truncateTo cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func truncateTo(s string, n int) string {
	const marker = " … (truncated)"
	cut := n - len(marker)
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
