package records

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RecordsFieldManager is the field manager of every write of a record Secret, in workload and
// management clusters alike: the stores' creates, updates and merge patches, which the API
// server records as operation Update.
const RecordsFieldManager = "gradual-records"

// legacyRecordsFieldManager is the field manager of records written before RecordsFieldManager
// was set. Those writes named no field manager, and the API server then records the part of the
// request's user agent before its first "/". The provider has always given its clients, the
// management cluster's and the workload clusters' alike (fleet.Management copies it), the user
// agent "terraform-provider-gradual/<version>", so every record an earlier version wrote carries
// this manager, with operation Update.
const legacyRecordsFieldManager = "terraform-provider-gradual"

// withRecordsFieldManager makes every write through c carry RecordsFieldManager.
func withRecordsFieldManager(c client.Client) client.Client {
	return client.WithFieldOwner(c, RecordsFieldManager)
}

// ForeignWriters says who, besides the provider, last wrote what the provider reads of a record
// Secret, from the Secret's managedFields: the writers (sorted, each once), none when the
// provider wrote all of it.
//
// The rule: a record is the provider's when every managedFields entry that owns a field the
// provider reads of it (any key of data, the app.kubernetes.io/managed-by label, labels and
// annotations under gradual.dev/) is an Update by RecordsFieldManager or by
// legacyRecordsFieldManager (records written by earlier versions; see there) without a
// subresource. Any other entry owning such a field is foreign: a Secret created by hand
// (kubectl-create, kubectl-client-side-apply), edited after the provider wrote it (kubectl-edit,
// kubectl-label, kubectl-patch, another controller), or applied server-side by anyone, even
// under one of our names (the stores never use server-side apply for records). An entry whose
// fields cannot be read counts as foreign too. Fields others own elsewhere (labels and
// annotations of their own, finalizers) change nothing the provider reads, and do not count.
//
// Limits: managedFields say who wrote, not who was allowed to. A writer that names itself
// gradual-records, sets the user agent terraform-provider-gradual, or clears managedFields (a
// Secret with none is taken as the provider's: the API server records managedFields on every
// write, so only such a clearing, or a fake client, leaves none) passes; and a field someone
// removed leaves no entry. The rule catches records planted or edited by the usual tools, not a
// writer set on hiding.
func ForeignWriters(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" &&
			(e.Manager == RecordsFieldManager || e.Manager == legacyRecordsFieldManager) {
			continue
		}
		owns, err := ownsRecordFields(e)
		if err != nil {
			out = append(out, describeWriter(e)+" (unreadable managedFields)")
			continue
		}
		if owns {
			out = append(out, describeWriter(e))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// describeWriter names an entry's writer: the manager, with how it wrote unless by an Update.
func describeWriter(e metav1.ManagedFieldsEntry) string {
	w := e.Manager
	if w == "" {
		w = `""`
	}
	switch {
	case e.Operation == metav1.ManagedFieldsOperationApply:
		w += " (server-side apply)"
	case e.Operation != metav1.ManagedFieldsOperationUpdate:
		w += fmt.Sprintf(" (operation %q)", e.Operation)
	}
	if e.Subresource != "" {
		w += fmt.Sprintf(" (subresource %q)", e.Subresource)
	}
	return w
}

// ownsRecordFields reports whether e owns a field the provider reads of a record Secret.
func ownsRecordFields(e metav1.ManagedFieldsEntry) (bool, error) {
	raw := e.FieldsV1.GetRawBytes()
	if len(raw) == 0 {
		return false, nil
	}
	if e.FieldsType != "FieldsV1" {
		return false, fmt.Errorf("fields type %q", e.FieldsType)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return false, err
	}
	if _, ok := top["f:data"]; ok {
		return true, nil
	}
	metaRaw, ok := top["f:metadata"]
	if !ok {
		return false, nil
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(metaRaw, &meta); err != nil {
		return false, err
	}
	for _, set := range []string{"f:labels", "f:annotations"} {
		setRaw, ok := meta[set]
		if !ok {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(setRaw, &fields); err != nil {
			return false, err
		}
		for f := range fields {
			name, ok := strings.CutPrefix(f, "f:")
			if ok && (strings.HasPrefix(name, "gradual.dev/") || (set == "f:labels" && name == LabelManagedBy)) {
				return true, nil
			}
		}
	}
	return false, nil
}

// writtenBy names who else wrote o (see ForeignWriters), "" when the provider wrote it.
func writtenBy(o metav1.Object) string {
	return strings.Join(ForeignWriters(o.GetManagedFields()), ", ")
}

// foreignWriteError is the error of a read or write that met Secret namespace/name written by
// by (see writtenBy).
func foreignWriteError(namespace, name, by string) error {
	return fmt.Errorf("record Secret %s/%s was written by %s, not by the provider; look at who wrote it "+
		"(its metadata.managedFields): the provider neither reads nor changes it, and delete it to go on", namespace, name, by)
}
