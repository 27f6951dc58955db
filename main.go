// Command terraform-provider-gradual serves the gradual provider to Terraform and OpenTofu.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/gradual-dev/terraform-provider-gradual/internal/provider"
)

// version is set by goreleaser at release time.
var version = "dev"

// profileEnv names a directory where each provider process writes its CPU profile
// (cpu-<pid>.pprof), for `make bench` and anyone asking where a slow apply spends the
// provider's time. The CLI starts several provider processes per command, hence one file each;
// `go tool pprof` merges them.
const profileEnv = "GRADUAL_CPU_PROFILE_DIR"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	if dir := os.Getenv(profileEnv); dir != "" {
		stop, err := startProfile(dir)
		if err != nil {
			log.Fatalf("%s: %v", profileEnv, err)
		}
		// The CLI ends a provider with a graceful shutdown, after which Serve returns.
		defer stop()
	}
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/gradual-dev/gradual",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}

// startProfile starts this process's CPU profile in dir and returns what ends and writes it.
func startProfile(dir string) (func(), error) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
