// Command gradual-update-extension runs the reference Cluster API in-place update extension
// (internal/testbed/updateext) for the demo: it serves Discovery, CanUpdateMachine and
// UpdateMachine over TLS and updates the kwok Nodes of the test bed's workload clusters.
//
//	gradual-update-extension --kubeconfig MGMT.kubeconfig --ca-file ca.pem [--address 127.0.0.1:9443]
//	    [--delay 5s] [--fail NAMESPACE/MACHINE=message ...] [--machine-fields /spec/version]
//	    [--bootstrap-fields /spec/files,/spec/ntp] [--infrastructure-fields ...]
//
// It prints its URL on stdout once serving, and writes the CA bundle clients must trust to
// --ca-file; it stops on SIGINT/SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed"
	"github.com/gradual-dev/terraform-provider-gradual/internal/testbed/updateext"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gradual-update-extension:", err)
		os.Exit(1)
	}
}

type failures map[string]string

func (f failures) String() string { return fmt.Sprint(map[string]string(f)) }
func (f failures) Set(s string) error {
	machine, msg, ok := strings.Cut(s, "=")
	if !ok || !strings.Contains(machine, "/") || msg == "" {
		return fmt.Errorf("want NAMESPACE/MACHINE=message, got %q", s)
	}
	f[machine] = msg
	return nil
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gradual-update-extension", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "management cluster kubeconfig (to find Machines' Nodes); empty: update no Node")
	address := fs.String("address", "127.0.0.1:0", "listen address")
	caFile := fs.String("ca-file", "", "write the CA bundle here (required)")
	delay := fs.Duration("delay", 5*time.Second, "how long an update takes")
	retry := fs.Int("retry-after", 1, "retryAfterSeconds answered while an update is in progress")
	machineFields := fs.String("machine-fields", "/spec/version", "Machine fields covered (JSON pointers, comma separated)")
	bootstrapFields := fs.String("bootstrap-fields", "/spec/files,/spec/ntp", "bootstrap config fields covered")
	infraFields := fs.String("infrastructure-fields", "", "infrastructure machine fields covered")
	fail := failures{}
	fs.Var(fail, "fail", "NAMESPACE/MACHINE=message: fail that machine's update (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *caFile == "" {
		return fmt.Errorf("--ca-file is required")
	}
	cfg := updateext.Config{
		Address:           *address,
		Delay:             *delay,
		RetryAfterSeconds: int32(*retry),
		Coverage: &updateext.Coverage{
			Machine: split(*machineFields), BootstrapConfig: split(*bootstrapFields), InfrastructureMachine: split(*infraFields),
		},
		Logf: func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) },
	}
	if *kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return err
		}
		c, err := client.New(rc, client.Options{Scheme: testbed.Scheme()})
		if err != nil {
			return err
		}
		cfg.Nodes = &updateext.ManagementNodes{Client: c}
	}
	srv, err := updateext.Start(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	for machine, msg := range fail {
		ns, name, _ := strings.Cut(machine, "/")
		srv.FailMachine(ns, name, msg)
	}
	if err := os.WriteFile(*caFile, srv.CABundle(), 0o644); err != nil {
		return err
	}
	fmt.Println(srv.URL())
	<-ctx.Done()
	return nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
