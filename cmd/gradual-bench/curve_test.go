package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1000, 4,64,4")
	if err != nil || !slices.Equal(got, []int{4, 64, 1000}) {
		t.Fatalf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "4,x", "0", "-3"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestCurveCSV(t *testing.T) {
	pt := curvePoint{n: 4,
		plan:     step{elapsed: 1500 * time.Millisecond, peakRSS: 60 << 20, lines: 300},
		apply:    step{elapsed: 6 * time.Second, peakRSS: 70 << 20, cpu: 1.0},
		noChange: step{elapsed: 2 * time.Second, peakRSS: 65 << 20, cpu: 0.5, lines: 17},
		kubectl:  4 * time.Second,
		// No drift repair at this point (a fleet without a solo server): its columns say so.
		changePlan: step{elapsed: 3 * time.Second, lines: 42},
	}
	lines := strings.Split(strings.TrimSpace(curveCSV([]curvePoint{pt}, "Terraform v1.11.4")), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	header, row := strings.Split(lines[0], ","), strings.Split(lines[1], ",")
	if len(header) != len(row) {
		t.Fatalf("header has %d fields, row %d", len(header), len(row))
	}
	want := map[string]string{"clusters": "4", "plan_s": "1.5", "plan_lines": "300", "apply_s": "6.0", "provider_cpu_s_per_cluster": "0.250",
		"nochange_plan_lines": "17", "provider_peak_rss_mib": "70", "kubectl_s": "4.0", "apply_over_kubectl": "1.50", "apply_rss_mib": "70",
		"drift_plan_s": "-", "drift_plan_lines": "-", "drift_apply_s": "-", "change_plan_s": "3.0", "change_plan_lines": "42", "cli": "Terraform v1.11.4"}
	seen := 0
	for i, h := range header {
		if w, ok := want[h]; ok {
			seen++
			if row[i] != w {
				t.Errorf("%s = %s, want %s", h, row[i], w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d expected columns in the header %v", seen, len(want), header)
	}
	md := curveMarkdown([]curvePoint{pt}, 4, "Terraform v1.11.4")
	if !strings.Contains(md, "driven by Terraform v1.11.4.") {
		t.Errorf("the table does not name the CLI:\n%s", md)
	}
	if !strings.Contains(md, "| 4 | 3.0 s | 42 | - | - | - |") {
		t.Errorf("the changes table lacks the point:\n%s", md)
	}
}

// The benchmark's own CPU time, read the way the provider's is.
func TestCPUTicks(t *testing.T) {
	deadline := time.Now().Add(150 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	if ticks := cpuTicks(os.Getpid()); ticks < 5 {
		t.Fatalf("cpuTicks = %d after 150ms of spinning, want at least 5", ticks)
	}
	if cpuTicks(-1) != 0 {
		t.Fatal("cpuTicks of no process is not 0")
	}
}

// Flags go before a saved plan: `tofu apply PLANFILE -no-color` is refused.
func TestTofuArgs(t *testing.T) {
	got := strings.Join(tofuArgs("d", []string{"apply", "drift.tfplan"}), " ")
	if want := "-chdir=d apply -input=false -no-color drift.tfplan"; got != want {
		t.Errorf("tofuArgs = %q, want %q", got, want)
	}
}

// The CLI's name and version, though it warns first (it does when TF_CLI_CONFIG_FILE names a
// missing file).
func TestCLIVersionLine(t *testing.T) {
	out := "\nWarning: Unable to open CLI configuration file\n\nThe CLI configuration file at \"/root/.terraformrc\" does not exist.\n\nOpenTofu v1.12.6\non linux_amd64\n"
	if got := cliVersionLine.FindString(out); got != "OpenTofu v1.12.6" {
		t.Errorf("found %q, want OpenTofu v1.12.6", got)
	}
}

func TestParseEngines(t *testing.T) {
	got, err := parseEngines("direct, flux,direct")
	if err != nil || !slices.Equal(got, []string{"direct", "flux"}) {
		t.Fatalf("parseEngines = %v, %v", got, err)
	}
	for _, bad := range []string{"", "argo", "direct,"} {
		if _, err := parseEngines(bad); err == nil {
			t.Errorf("parseEngines(%q) accepted", bad)
		}
	}
}

// A curve of both engines: the CSV names each point's engine and gives the Flux controllers'
// cost for Flux points only; the table of the direct engine keeps to direct points, and the
// engines' table holds both.
func TestCurveOfBothEngines(t *testing.T) {
	direct := curvePoint{n: 64, engine: engineDirect, apply: step{elapsed: 10 * time.Second, cpu: 3.2, peakRSS: 120 << 20}, kubectl: 16 * time.Second}
	flux := curvePoint{n: 64, engine: engineFlux, apply: step{elapsed: 40 * time.Second, cpu: 0.64, peakRSS: 90 << 20},
		flux: fluxCost{cpu: 30.5, peakRSS: 300 << 20}, kubectl: 16 * time.Second}
	lines := strings.Split(strings.TrimSpace(curveCSV([]curvePoint{direct, flux}, "OpenTofu v1.12.6")), "\n")
	header := strings.Split(lines[0], ",")
	col := func(row, name string) string {
		i := slices.Index(header, name)
		if i < 0 {
			t.Fatalf("no column %s in %v", name, header)
		}
		return strings.Split(row, ",")[i]
	}
	for _, c := range []struct{ row, name, want string }{
		{lines[1], "engine", "direct"}, {lines[1], "flux_controllers_cpu_s", "-"}, {lines[1], "flux_controllers_peak_rss_mib", "-"},
		{lines[2], "engine", "flux"}, {lines[2], "flux_controllers_cpu_s", "30.5"}, {lines[2], "flux_controllers_peak_rss_mib", "300"},
		{lines[2], "provider_cpu_s_per_cluster", "0.010"}, {lines[2], "apply_over_kubectl", "2.50"}, {lines[2], "cli", "OpenTofu v1.12.6"},
	} {
		if got := col(c.row, c.name); got != c.want {
			t.Errorf("%s = %s, want %s", c.name, got, c.want)
		}
	}
	md := curveMarkdown([]curvePoint{direct, flux}, 4, "OpenTofu v1.12.6")
	if strings.Count(md, "| 64 | ") != 4 { // the direct table, the changes table, and both engines' rows
		t.Errorf("want the point of 64 four times:\n%s", md)
	}
	if !strings.Contains(md, "| 64 | flux | 40.0 s | 0.6 s | 0.010 s | 90 MiB | 30.5 s | 300 MiB |") {
		t.Errorf("the engines' table lacks the Flux point:\n%s", md)
	}
}
