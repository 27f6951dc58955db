package testbed

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// ociRegistryEnv, set to HOST:PORT, turns any program that links this package (the test binary,
// gradual-testbed) into the fleet's OCI registry: the Flux option starts its own executable again
// with it, so the registry needs no binary of its own and outlives the process that started it.
const ociRegistryEnv = "GRADUAL_TESTBED_OCI_REGISTRY"

func init() {
	if addr := os.Getenv(ociRegistryEnv); addr != "" {
		if err := ServeOCIRegistry(addr); err != nil {
			fmt.Fprintln(os.Stderr, "gradual-testbed OCI registry:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// ServeOCIRegistry serves go-containerregistry's in-memory registry (the OCI distribution API,
// plain HTTP) on addr until the process ends. Everything pushed lives in memory.
func ServeOCIRegistry(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	logger.Printf("OCI registry (go-containerregistry pkg/registry, in memory) serving on http://%s", l.Addr())
	s := &http.Server{Handler: registry.New(registry.Logger(logger)), ReadHeaderTimeout: 10 * time.Second}
	return s.Serve(l)
}
