package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Credentials are what another client (the kubernetes or helm provider, kubectl) needs to reach a
// workload cluster: the endpoint, its CA and the inline credentials of the cluster's kubeconfig
// Secret. They are handed out by the ephemeral `gradual_cluster_kubeconfig` resource and never
// stored.
type Credentials struct {
	Host                 string
	TLSServerName        string
	CertificateAuthority []byte
	Token                string
	ClientCertificate    []byte
	ClientKey            []byte
	// Kubeconfig is the Secret's `value`, unchanged.
	Kubeconfig []byte
}

// WorkloadCredentials reads the `<name>-kubeconfig` Secret of the workload cluster namespace/name
// and returns its credentials. The same rules as for rollouts apply: only inline credentials (no
// exec plugin, local file or proxy), so that whoever can write the Secret cannot make the runner
// read its files. A missing Secret is explained (Cluster deleted, or not provisioned yet). Errors
// never quote the kubeconfig.
func (m *Management) WorkloadCredentials(ctx context.Context, namespace, name string) (Credentials, error) {
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: KubeconfigSecretName(name)}
	if err := m.Client.Get(ctx, key, &secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return Credentials{}, fmt.Errorf("cluster %s/%s: read kubeconfig Secret %s: %w", namespace, name, key.Name, m.unreachable(err))
		}
		switch cluster, err := m.clusterMetadata(ctx, namespace, name); {
		case apierrors.IsNotFound(err):
			return Credentials{}, fmt.Errorf("there is no Cluster %s/%s", namespace, name)
		case err == nil && !cluster.DeletionTimestamp.IsZero():
			return Credentials{}, fmt.Errorf("cluster %s/%s is being deleted and its kubeconfig Secret %s is gone", namespace, name, key.Name)
		}
		return Credentials{}, fmt.Errorf("cluster %s/%s has no kubeconfig Secret %s yet; Cluster API writes it once the control plane is initialized",
			namespace, name, key.Name)
	}
	value := secret.Data[KubeconfigSecretKey]
	if len(value) == 0 {
		return Credentials{}, fmt.Errorf("cluster %s/%s: kubeconfig Secret %s has no %q key", namespace, name, key.Name, KubeconfigSecretKey)
	}
	cfg, err := WorkloadRESTConfig(value)
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster %s/%s: %w", namespace, name, err)
	}
	return Credentials{
		Host:                 cfg.Host,
		TLSServerName:        cfg.ServerName,
		CertificateAuthority: cfg.CAData,
		Token:                cfg.BearerToken,
		ClientCertificate:    cfg.CertData,
		ClientKey:            cfg.KeyData,
		Kubeconfig:           value,
	}, nil
}
