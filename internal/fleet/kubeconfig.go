package fleet

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WorkloadRESTConfig builds a REST config from a workload cluster's kubeconfig (the Secret's
// `value`). Like Cluster API's own cluster cache, only inline credentials are accepted: a
// kubeconfig that would run a program on this machine (exec credential plugins, auth-provider
// plugins), read a local file (tokenFile, client-certificate, client-key, certificate-authority)
// or send requests through a proxy is refused. Whoever can write a `<name>-kubeconfig` Secret
// could otherwise make the runner read its files and send them anywhere; CAPI's kubeconfigs
// never need these. Errors never quote the kubeconfig.
func WorkloadRESTConfig(kubeconfig []byte) (*rest.Config, error) {
	api, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig cannot be parsed")
	}
	if problem := kubeconfigProblem(api); problem != "" {
		return nil, fmt.Errorf("%s", problem)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*api, api.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig is not usable: its current context is incomplete")
	}
	return cfg, nil
}

// kubeconfigProblem says why a parsed workload kubeconfig cannot be used, or "". Paths and proxy
// URLs are not quoted: they come from whoever wrote the Secret and may carry credentials.
func kubeconfigProblem(api *clientcmdapi.Config) string {
	const inline = "; workload kubeconfigs must carry their credentials inline"
	ctx, ok := api.Contexts[api.CurrentContext]
	if !ok {
		return "kubeconfig has no current context"
	}
	cluster := api.Clusters[ctx.Cluster]
	if cluster == nil {
		return fmt.Sprintf("kubeconfig context %q names a cluster that is not defined", api.CurrentContext)
	}
	switch {
	case cluster.CertificateAuthority != "":
		return "kubeconfig reads the cluster's CA from a local file (certificate-authority)" + inline + " (certificate-authority-data)"
	case cluster.ProxyURL != "":
		return "kubeconfig sends requests through a proxy (proxy-url); workload kubeconfigs must connect to the cluster directly"
	}
	user := api.AuthInfos[ctx.AuthInfo]
	switch {
	case user == nil:
		return ""
	case user.Exec != nil:
		return fmt.Sprintf("kubeconfig asks to run an exec credential plugin (%q)"+inline, user.Exec.Command)
	case user.AuthProvider != nil:
		return fmt.Sprintf("kubeconfig uses the %q auth-provider plugin"+inline, user.AuthProvider.Name)
	case user.TokenFile != "":
		return "kubeconfig reads its token from a local file (tokenFile)" + inline + " (token)"
	case user.ClientCertificate != "" || user.ClientKey != "":
		return "kubeconfig reads its client certificate or key from a local file (client-certificate, client-key)" + inline +
			" (client-certificate-data, client-key-data)"
	}
	return ""
}

// checkKubeconfig returns the problem with a kubeconfig Secret's value, or "".
func checkKubeconfig(value []byte) string {
	api, err := clientcmd.Load(value)
	if err != nil {
		return "kubeconfig in the Secret cannot be parsed"
	}
	return kubeconfigProblem(api)
}
