package inplaceupdate_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gradual-dev/terraform-provider-gradual/internal/acctest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
)

const planData = "data.gradual_inplace_update_plan.p"

func planConfig(b *bed, body string) string {
	return acctest.ProviderConfig(b.f) + "data \"gradual_inplace_update_plan\" \"p\" {\n" + b.targetHCL() + body + "}\n"
}

func machineAt(i int) tfjsonpath.Path { return tfjsonpath.New("machines").AtSliceIndex(i) }

// The plan shows, machine by machine, the node, what changes, the strategy and the extension
// that covers it; an uncovered change is replaced with fallback rolling and fails the plan,
// naming the machine and the field, with fallback none.
func TestAccInplacePlan_strategies(t *testing.T) {
	b := newBed(t, 2)
	srv := b.extension(t, "ref", nil, 0)
	exts := extensionsHCL(extOf("ref", srv))
	change := `  version = "v1.37.0"
  bootstrap_config_spec_patch = jsonencode({ ntp = { servers = ["pool.ntp.org"] } })
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: planConfig(b, change+exts),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(planData, machineAt(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"name": knownvalue.StringExact(b.machines[0]), "node": knownvalue.StringExact("kwok-node-0"),
						"strategy":         knownvalue.StringExact("in-place"),
						"changed_fields":   strs("machine spec.version", "bootstrapConfig spec.ntp.servers"),
						"extensions":       strs("ref"),
						"uncovered_fields": strs(),
					})),
					statecheck.ExpectKnownValue(planData, machineAt(1).AtMapKey("node"), knownvalue.StringExact("kwok-node-1")),
					statecheck.ExpectKnownValue(planData, tfjsonpath.New("counts"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"total": knownvalue.Int64Exact(2), "in_place": knownvalue.Int64Exact(2), "rolling": knownvalue.Int64Exact(0),
						"blocked": knownvalue.Int64Exact(0), "unchanged": knownvalue.Int64Exact(0),
					})),
				},
			},
			{
				// Refused at validation, before anything is read.
				Config:      planConfig(b, `  machine_spec_patch = "[1, 2]"`+"\n"+exts),
				ExpectError: regexp.MustCompile(`Invalid Spec Patch`),
			},
			{
				// The infrastructure machine's size is nothing the extension can change.
				Config: planConfig(b, change+`  infrastructure_machine_spec_patch = jsonencode({ size = "large" })
  fallback = "rolling"
`+exts),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(planData, machineAt(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"strategy":         knownvalue.StringExact("rolling"),
						"uncovered_fields": strs("infrastructureMachine spec.size"),
						"extensions":       strs("ref"),
					})),
					statecheck.ExpectKnownValue(planData, tfjsonpath.New("counts").AtMapKey("rolling"), knownvalue.Int64Exact(2)),
				},
			},
			{
				Config: planConfig(b, change+`  infrastructure_machine_spec_patch = jsonencode({ size = "large" })
`+exts),
				ExpectError: regexp.MustCompile(`(?s)Machines Cannot Be Updated In Place.*` + b.machines[0] + `.*infrastructureMachine\s+spec.size`),
			},
			{
				// Nothing to change: no extension needs asking.
				Config: planConfig(b, `  version = "`+"v1.36.3"+`"
`+exts),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(planData, tfjsonpath.New("counts").AtMapKey("unchanged"), knownvalue.Int64Exact(2)),
				},
			},
		},
	})
	if n := srv.Calls()["UpdateMachine"]; n != 0 {
		t.Errorf("planning called UpdateMachine %d times", n)
	}
}

// Two extensions together cover a change neither covers alone: one does the Kubernetes
// version, the other the bootstrap config's NTP servers.
func TestAccInplacePlan_twoExtensions(t *testing.T) {
	b := newBed(t, 1)
	versions := b.extension(t, "versions", &updateext.Coverage{Machine: []string{"/spec/version"}}, 0)
	ntp := b.extension(t, "ntp", &updateext.Coverage{BootstrapConfig: []string{"/spec/ntp"}}, 0)
	change := `  version = "v1.37.1"
  bootstrap_config_spec_patch = jsonencode({ ntp = { servers = ["time.example"] } })
  fallback = "rolling"
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: planConfig(b, change+extensionsHCL(extOf("versions", versions))),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(planData, machineAt(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"strategy": knownvalue.StringExact("rolling"), "uncovered_fields": strs("bootstrapConfig spec.ntp.servers"),
					})),
				},
			},
			{
				Config: planConfig(b, change+extensionsHCL(extOf("ntp", ntp))),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(planData, machineAt(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"strategy": knownvalue.StringExact("rolling"), "uncovered_fields": strs("machine spec.version"),
					})),
				},
			},
			{
				Config: planConfig(b, change+extensionsHCL(extOf("versions", versions), extOf("ntp", ntp))),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(planData, machineAt(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"strategy":   knownvalue.StringExact("in-place"),
						"extensions": strs("versions", "ntp"),
						"coverage": knownvalue.ListExact([]knownvalue.Check{
							knownvalue.ObjectExact(map[string]knownvalue.Check{"extension": knownvalue.StringExact("versions"), "fields": strs("machine spec.version")}),
							knownvalue.ObjectExact(map[string]knownvalue.Check{"extension": knownvalue.StringExact("ntp"), "fields": strs("bootstrapConfig spec.ntp.servers")}),
						}),
					})),
				},
			},
		},
	})
}

// discoveryOK is a Discovery answer listing one CanUpdateMachine handler, "can-update".
const discoveryOK = `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryResponse","status":"Success",
"handlers":[{"name":"can-update","requestHook":{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","hook":"CanUpdateMachine"},"timeoutSeconds":10,"failurePolicy":"Fail"}]}`

// misbehaving is an HTTPS extension whose Discovery answers well and whose CanUpdateMachine
// handler does what hook says.
func misbehaving(t *testing.T, hook http.HandlerFunc) ext {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/discovery") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(discoveryOK))
			return
		}
		hook(w, r)
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return ext{url: srv.URL, ca: string(ca), timeout: "3s"}
}

// Extensions that fail, hang, redirect, answer garbage or are plain HTTP give a clear error,
// within their timeout.
func TestAccInplacePlan_badExtensions(t *testing.T) {
	b := newBed(t, 1)
	named := func(name string, e ext) ext { e.name = name; return e }
	fail500 := named("broken", misbehaving(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "internal trouble", http.StatusInternalServerError)
	}))
	stop := make(chan struct{})
	hang := named("sleepy", misbehaving(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	// Registered after the servers' own cleanups, so it runs before them: Close waits for
	// handlers.
	t.Cleanup(func() { close(stop) })
	redirect := named("mover", misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/hook", http.StatusTemporaryRedirect)
	}))
	garbage := named("garbled", misbehaving(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status": "Success", "machinePatch": `))
	}))
	plain := ext{name: "plain", url: "http://127.0.0.1:1"}
	change := "  version = \"v1.37.2\"\n"
	var started time.Time
	step := func(e ext, want string) resource.TestStep {
		return resource.TestStep{
			PreConfig:   func() { started = time.Now() },
			Config:      planConfig(b, change+extensionsHCL(e)),
			ExpectError: regexp.MustCompile(want),
		}
	}
	elapsed := func() { t.Logf("last step took %s", time.Since(started).Round(time.Millisecond)) }
	steps := []resource.TestStep{
		step(fail500, `(?s)Update Extension Failed.*broken.*HTTP\s+500.*internal trouble`),
		step(hang, `(?s)Update Extension Failed.*sleepy.*no answer within the 3s\s+timeout`),
		step(redirect, `(?s)Update Extension Failed.*mover.*redirect`),
		step(garbage, `(?s)Update Extension Failed.*garbled.*not\s+a\s+CanUpdateMachineResponse`),
		step(plain, `(?s)Update Extension Failed.*plain.*plain HTTP is refused`),
	}
	for i := 1; i < len(steps); i++ {
		prev := steps[i].PreConfig
		steps[i].PreConfig = func() { elapsed(); prev() }
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProviderFactories, Steps: steps})
	elapsed()
	if d := time.Since(started); d > 20*time.Second {
		t.Errorf("the last error took %s", d)
	}
}

// Without `extensions`, the extensions are those registered as ExtensionConfig objects with a
// URL, found through their Discovery hook; one that points at a Service is left out with a
// warning.
func TestAccInplacePlan_extensionConfigDiscovery(t *testing.T) {
	b := newBed(t, 1)
	srv := b.extension(t, "registered", nil, 0)
	name := acctest.UniqueLabel("ext")
	mc, err := b.f.ManagementClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ec := range []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "runtime.cluster.x-k8s.io/v1alpha1", "kind": "ExtensionConfig",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"clientConfig": map[string]any{
				"url": srv.URL(), "caBundle": base64.StdEncoding.EncodeToString(srv.CABundle()),
			}},
		}},
		{Object: map[string]any{
			"apiVersion": "runtime.cluster.x-k8s.io/v1alpha1", "kind": "ExtensionConfig",
			"metadata": map[string]any{"name": name + "-in-cluster"},
			"spec": map[string]any{"clientConfig": map[string]any{
				"service": map[string]any{"namespace": "capi-system", "name": "some-extension"},
			}},
		}},
	} {
		if err := mc.Create(ctx, ec); err != nil {
			t.Fatalf("create ExtensionConfig %s: %v", ec.GetName(), err)
		}
		t.Cleanup(func() { _ = mc.Delete(context.Background(), ec) })
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProviderFactories,
		Steps: []resource.TestStep{{
			Config: planConfig(b, "  version = \"v1.37.5\"\n"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(planData, machineAt(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"strategy": knownvalue.StringExact("in-place"), "extensions": strs(name),
				})),
			},
		}},
	})
	if n := srv.Calls()["Discovery"]; n == 0 {
		t.Error("the registered extension's Discovery hook was never called")
	}
}
