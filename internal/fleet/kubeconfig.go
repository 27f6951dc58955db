package fleet

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WorkloadRESTConfig builds a REST config from a workload cluster's kubeconfig (the Secret's
// `value`). Kubeconfigs that would run a program on this machine (exec credential plugins) or
// use auth-provider plugins are refused: the provider runs inside CI pipelines, and CAPI's own
// kubeconfigs never need them. Errors never quote the kubeconfig.
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

// kubeconfigProblem says why a parsed workload kubeconfig cannot be used, or "".
func kubeconfigProblem(api *clientcmdapi.Config) string {
	ctx, ok := api.Contexts[api.CurrentContext]
	if !ok {
		return "kubeconfig has no current context"
	}
	user := api.AuthInfos[ctx.AuthInfo]
	switch {
	case api.Clusters[ctx.Cluster] == nil:
		return fmt.Sprintf("kubeconfig context %q names a cluster that is not defined", api.CurrentContext)
	case user == nil:
		return ""
	case user.Exec != nil:
		return fmt.Sprintf("kubeconfig asks to run an exec credential plugin (%q); workload kubeconfigs must carry their credentials", user.Exec.Command)
	case user.AuthProvider != nil:
		return fmt.Sprintf("kubeconfig uses the %q auth-provider plugin; workload kubeconfigs must carry their credentials", user.AuthProvider.Name)
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
