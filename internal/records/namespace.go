package records

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createInNamespace creates obj and, when the namespace turns out to be missing, creates the
// namespace and tries once more. Checking only on failure spares a request on every write.
func createInNamespace(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	if nerr := ensureNamespace(ctx, c, obj.GetNamespace()); nerr != nil {
		return fmt.Errorf("%w (and creating namespace %s: %v)", err, obj.GetNamespace(), nerr)
	}
	return c.Create(ctx, obj)
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{LabelManagedBy: ManagedBy},
	}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
