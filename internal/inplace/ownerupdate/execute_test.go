package ownerupdate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace"
	"github.com/gradual-dev/terraform-provider-gradual/internal/inplace/owners"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// The change goes to the owner: the bootstrap template is rotated (a new, content-named
// template; the old one untouched), the MachineDeployment points at it and carries the
// version. Nothing else is written: no Machine, infrastructure machine or bootstrap config.
func TestExecuteWritesTheOwnerAndRotatesTemplates(t *testing.T) {
	c, writes := world(t, nil, nil)
	p, up := &owners.Planner{Client: c}, updater(c)
	change := inplace.Change{Version: "v1.34.1", BootstrapConfigSpec: []byte(`{"files":[{"path":"/etc/motd","content":"hi"}]}`)}
	res, err := p.Plan(t.Context(), owners.Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone, Endpoints: nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Owner.Templates) != 1 {
		t.Fatalf("rotated templates %d, want 1 (the bootstrap one)", len(res.Owner.Templates))
	}
	rotated := res.Owner.Templates[0].GetName()
	if !strings.HasPrefix(rotated, "md-0-gip-") {
		t.Errorf("rotated template name %q", rotated)
	}
	exec, err := up.Execute(t.Context(), res, ExecuteRequest{VerifyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(*writes, "; "), "create KubeadmConfigTemplate "+rotated+"; patch MachineDeployment md-0"; got != want {
		t.Errorf("writes: %s\nwant:   %s", got, want)
	}
	if !exec.OwnerChanged || len(exec.Templates) != 1 {
		t.Errorf("execution %+v", exec)
	}
	md := obj(machineDeploymentGVK, "md-0", map[string]any{})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "version"); v != "v1.34.1" {
		t.Errorf("template version %q", v)
	}
	if n, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "bootstrap", "configRef", "name"); n != rotated {
		t.Errorf("bootstrap configRef %q, want %q", n, rotated)
	}
	if n, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "infrastructureRef", "name"); n != "md-0" {
		t.Errorf("infrastructureRef %q changed without an infrastructure patch", n)
	}
	if md.GetAnnotations()[owners.AnnotationRevision] != res.Revision {
		t.Errorf("owner annotations %v", md.GetAnnotations())
	}
	old := obj(kctGVK, "md-0", map[string]any{})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	if files, _, _ := unstructured.NestedSlice(old.Object, "spec", "template", "spec", "files"); len(files) != 0 {
		t.Errorf("the old template was edited: files %v", files)
	}

	// A second plan of the same change finds the owner as desired: no new template, no write.
	*writes = nil
	res, err = p.Plan(t.Context(), owners.Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone})
	if err != nil {
		t.Fatal(err)
	}
	if changes, err := res.Owner.Changes(); err != nil || changes {
		t.Errorf("owner still changes after apply (%v): templates %d", err, len(res.Owner.Templates))
	}
	if _, err := up.Execute(t.Context(), res, ExecuteRequest{VerifyTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if len(*writes) != 0 {
		t.Errorf("a repeated apply wrote %v", *writes)
	}
}

// A run whose Lease may be another apply's by now (records.Fenced) writes nothing: no rotated
// template, no owner.
func TestExecuteWritesNothingPastItsFence(t *testing.T) {
	c, writes := world(t, nil, nil)
	p, up := &owners.Planner{Client: c}, updater(c)
	change := inplace.Change{Version: "v1.34.1", BootstrapConfigSpec: []byte(`{"files":[{"path":"/etc/motd","content":"hi"}]}`)}
	res, err := p.Plan(t.Context(), owners.Request{Selection: mdSelection, Change: change, Fallback: inplace.FallbackNone})
	if err != nil {
		t.Fatal(err)
	}
	fenced := records.WithFence(t.Context(), func() error { return records.ErrLeaseLost })
	if _, err := up.Execute(fenced, res, ExecuteRequest{VerifyTimeout: 5 * time.Second}); !errors.Is(err, records.ErrLeaseLost) {
		t.Fatalf("Execute past the fence: %v, want ErrLeaseLost", err)
	}
	if len(*writes) != 0 {
		t.Errorf("writes past the fence: %v", *writes)
	}
}

// Cluster API's controllers write a fresh MachineDeployment's status while the apply runs: the
// resourceVersion moves under the plan's write, the spec the plan read does not. The owner is
// read again and written under the new resourceVersion. A spec changed since the plan is still
// refused, naming the owner.
func TestWriteOwnerSurvivesStatusWrites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(md *unstructured.Unstructured)
		refused bool
	}{
		{"status written meanwhile", func(md *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(md.Object, int64(3), "status", "readyReplicas")
		}, false},
		{"spec changed meanwhile", func(md *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(md.Object, int64(5), "spec", "replicas")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := world(t, nil, nil)
			changed := false
			busy := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, o client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if !changed && o.GetName() == "md-0" {
						changed = true
						md := obj(machineDeploymentGVK, "md-0", map[string]any{})
						if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
							return err
						}
						tc.change(md)
						if err := c.Update(ctx, md); err != nil {
							return err
						}
					}
					return c.Patch(ctx, o, patch, opts...)
				},
			})
			p, up := &owners.Planner{Client: busy}, updater(busy)
			res, err := p.Plan(t.Context(), owners.Request{Selection: mdSelection, Change: inplace.Change{Version: "v1.34.1"}, Fallback: inplace.FallbackNone})
			if err != nil {
				t.Fatal(err)
			}
			_, err = up.Execute(t.Context(), res, ExecuteRequest{VerifyTimeout: 50 * time.Millisecond})
			if got := strings.Contains(errText(err), "Owner Changed Since The Plan"); got != tc.refused {
				t.Fatalf("Execute: %v; want refused %v", err, tc.refused)
			}
			if !changed {
				t.Fatal("nothing was written meanwhile: the test proves nothing")
			}
			md := obj(machineDeploymentGVK, "md-0", map[string]any{})
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(md), md); err != nil {
				t.Fatal(err)
			}
			v, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "version")
			if (v == "v1.34.1") == tc.refused {
				t.Errorf("owner version %q after the apply, refused %v", v, tc.refused)
			}
		})
	}
}
