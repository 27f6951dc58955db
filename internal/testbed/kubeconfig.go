package testbed

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ManagementContext is the context name in the management cluster's kubeconfig.
const ManagementContext = "mgmt"

// adminKubeconfig reads the kubeconfig kwokctl wrote for a cluster (client certificate files
// referenced by path) and returns a self-contained one with the credentials inline, named the
// way CAPI names a workload cluster's kubeconfig (<name>-admin@<name>) unless context is given.
func adminKubeconfig(kwokKubeconfig, kwokName, name, context string) ([]byte, string, error) {
	cfg, err := clientcmd.LoadFromFile(kwokKubeconfig)
	if err != nil {
		return nil, "", fmt.Errorf("read kwokctl kubeconfig %s: %w", kwokKubeconfig, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, "", fmt.Errorf("inline credentials of %s: %w", kwokKubeconfig, err)
	}
	kctx, ok := cfg.Contexts[kwokName]
	if !ok {
		// kwokctl names its context kwok-<name>.
		kctx, ok = cfg.Contexts["kwok-"+kwokName]
	}
	if !ok {
		return nil, "", fmt.Errorf("kwokctl kubeconfig %s has no context for cluster %s", kwokKubeconfig, kwokName)
	}
	cluster, user := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if cluster == nil || user == nil {
		return nil, "", fmt.Errorf("kwokctl kubeconfig %s: context for %s lacks its cluster or user", kwokKubeconfig, kwokName)
	}
	userName := name + "-admin"
	if context == "" {
		context = userName + "@" + name
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = cluster
	out.AuthInfos[userName] = user
	out.Contexts[context] = &clientcmdapi.Context{Cluster: name, AuthInfo: userName}
	out.CurrentContext = context
	raw, err := clientcmd.Write(*out)
	return raw, cluster.Server, err
}

// execKubeconfig is a workload kubeconfig that asks to run a credential plugin, which the provider
// must refuse to run for workload clusters. Its server is never contacted.
func execKubeconfig(name string) ([]byte, error) {
	userName := name + "-admin"
	context := userName + "@" + name
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	out.AuthInfos[userName] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         "gradual-testbed-credential-plugin",
		Args:            []string{"token", name},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	out.Contexts[context] = &clientcmdapi.Context{Cluster: name, AuthInfo: userName}
	out.CurrentContext = context
	return clientcmd.Write(*out)
}

func writePrivate(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// RESTConfig is the client configuration of a cluster that has a control plane.
func (c Cluster) RESTConfig() (*rest.Config, error) {
	if c.KubeconfigPath == "" {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, errNoControlPlane)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: load %s: %w", c.Name, c.KubeconfigPath, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}
