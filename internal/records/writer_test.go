package records

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// entry is a managedFields entry of manager by op, owning fields (FieldsV1 JSON; "" owns none).
func entry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1"}
	if fields != "" {
		e.FieldsV1 = metav1.NewFieldsV1(fields)
	}
	return e
}

const (
	recordFields = `{"f:data":{".":{},"f:record":{}},"f:metadata":{"f:annotations":{".":{},"f:gradual.dev/rollout-key":{}},` +
		`"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:gradual.dev/state":{}}},"f:type":{}}`
	update = metav1.ManagedFieldsOperationUpdate
	apply  = metav1.ManagedFieldsOperationApply
)

func TestForeignWriters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    []string
	}{
		{"no managedFields", nil, nil},
		{"written by the stores", []metav1.ManagedFieldsEntry{entry(RecordsFieldManager, update, recordFields)}, nil},
		{"written by an earlier version (user agent terraform-provider-gradual/<version>)", []metav1.ManagedFieldsEntry{entry("terraform-provider-gradual", update, recordFields)}, nil},
		{"an earlier version's record relabelled by this one", []metav1.ManagedFieldsEntry{
			entry("terraform-provider-gradual", update, recordFields),
			entry(RecordsFieldManager, update, `{"f:metadata":{"f:labels":{"f:gradual.dev/state":{}}}}`),
		}, nil},
		{"planted with kubectl create", []metav1.ManagedFieldsEntry{entry("kubectl-create", update, recordFields)}, []string{"kubectl-create"}},
		{"planted with kubectl apply", []metav1.ManagedFieldsEntry{
			entry("kubectl-client-side-apply", update, `{"f:data":{"f:record":{}},"f:metadata":{"f:annotations":{"f:kubectl.kubernetes.io/last-applied-configuration":{}}}}`),
		}, []string{"kubectl-client-side-apply"}},
		{"data edited with kubectl edit", []metav1.ManagedFieldsEntry{
			entry(RecordsFieldManager, update, recordFields),
			entry("kubectl-edit", update, `{"f:data":{"f:record":{}}}`),
		}, []string{"kubectl-edit"}},
		{"state relabelled with kubectl label", []metav1.ManagedFieldsEntry{
			entry(RecordsFieldManager, update, recordFields),
			entry("kubectl-label", update, `{"f:metadata":{"f:labels":{"f:gradual.dev/state":{}}}}`),
		}, []string{"kubectl-label"}},
		{"reason annotated with kubectl annotate", []metav1.ManagedFieldsEntry{
			entry(RecordsFieldManager, update, recordFields),
			entry("kubectl-annotate", update, `{"f:metadata":{"f:annotations":{"f:gradual.dev/reason":{}}}}`),
		}, []string{"kubectl-annotate"}},
		{"managed-by label set by someone else", []metav1.ManagedFieldsEntry{
			entry("helm", update, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}}}`),
		}, []string{"helm"}},
		{"a label of someone else's own", []metav1.ManagedFieldsEntry{
			entry(RecordsFieldManager, update, recordFields),
			entry("kubectl-label", update, `{"f:metadata":{"f:labels":{"f:team":{}},"f:annotations":{"f:example.com/note":{}}}}`),
		}, nil},
		{"a finalizer and the type", []metav1.ManagedFieldsEntry{
			entry(RecordsFieldManager, update, recordFields),
			entry("backup-operator", update, `{"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/keep\"":{}}},"f:type":{}}`),
		}, nil},
		{"an entry owning nothing", []metav1.ManagedFieldsEntry{entry(RecordsFieldManager, update, recordFields), entry("kubectl-edit", update, "")}, nil},
		{"our name, but server-side apply", []metav1.ManagedFieldsEntry{entry(RecordsFieldManager, apply, recordFields)}, []string{"gradual-records (server-side apply)"}},
		{"a rollout's apply manager", []metav1.ManagedFieldsEntry{entry("gradual/rollout/fleet/web", apply, recordFields)}, []string{"gradual/rollout/fleet/web (server-side apply)"}},
		{"our name, on a subresource", []metav1.ManagedFieldsEntry{func() metav1.ManagedFieldsEntry {
			e := entry(RecordsFieldManager, update, recordFields)
			e.Subresource = "status"
			return e
		}()}, []string{`gradual-records (subresource "status")`}},
		{"a test binary's user agent", []metav1.ManagedFieldsEntry{entry("records.test", update, recordFields)}, []string{"records.test"}},
		{"several, sorted, each once", []metav1.ManagedFieldsEntry{
			entry("kubectl-label", update, `{"f:metadata":{"f:labels":{"f:gradual.dev/state":{}}}}`),
			entry("kubectl-create", update, recordFields),
			entry("kubectl-label", apply, `{"f:data":{"f:record":{}}}`),
			entry("kubectl-label", update, `{"f:data":{"f:record":{}}}`),
		}, []string{"kubectl-create", "kubectl-label", "kubectl-label (server-side apply)"}},
		{"unreadable fields", []metav1.ManagedFieldsEntry{entry("kubectl-edit", update, `{"f:metadata":[]}`)}, []string{"kubectl-edit (unreadable managedFields)"}},
		{"unknown fields type", []metav1.ManagedFieldsEntry{func() metav1.ManagedFieldsEntry {
			e := entry("kubectl-edit", update, recordFields)
			e.FieldsType = "FieldsV2"
			return e
		}()}, []string{"kubectl-edit (unreadable managedFields)"}},
		{"no manager name", []metav1.ManagedFieldsEntry{entry("", update, recordFields)}, []string{`""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ForeignWriters(tc.entries); !slices.Equal(got, tc.want) {
				t.Fatalf("ForeignWriters = %q, want %q", got, tc.want)
			}
		})
	}
}
