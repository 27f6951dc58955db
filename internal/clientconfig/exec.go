package clientconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
)

// execWaitDelay is how long a timed-out plugin's children may keep its output open after the
// plugin is killed (a shell script's `sleep`).
const execWaitDelay = 2 * time.Second

// checkExec runs an exec credential plugin once, as client-go would, bounded by timeout, and
// checks that it prints an ExecCredential with a token or a client certificate. client-go runs
// plugins without a time limit, so a plugin that hangs (waiting for a browser login, a
// credential helper that never answers) would hang the first request; here it fails Configure
// naming the command. Later refreshes, when the credential expires during a long apply, are
// client-go's. Errors never quote the plugin's arguments, environment or output, and quote its
// standard error only with the env values removed.
func checkExec(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	e := cfg.ExecProvider
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := fmt.Sprintf("The exec credential plugin %q", e.Command)
	cmd := exec.CommandContext(ctx, e.Command, e.Args...)
	cmd.WaitDelay = execWaitDelay
	cmd.Env = os.Environ()
	for _, v := range e.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	info, err := execInfo(cfg)
	if err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+info)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return usererr.New("Exec Credential Plugin Timed Out",
			fmt.Sprintf("%s did not print a credential within %s (the provider's request_timeout) and was stopped. "+
				"Check that it can run without a terminal or browser (no interactive login) and reach its identity service, "+
				"or raise request_timeout.", name, timeout))
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		return usererr.New("Exec Credential Plugin Not Found",
			fmt.Sprintf("%s was not found. Install it on the machine that runs Terraform, or set exec.command to its full path.", name))
	case err != nil:
		var exit *exec.ExitError
		detail := fmt.Sprintf("%s failed (%s).", name, scrub(err))
		if errors.As(err, &exit) {
			detail = fmt.Sprintf("%s exited with code %d.", name, exit.ExitCode())
		}
		if line := lastLine(stderr.String(), e.Env); line != "" {
			detail += fmt.Sprintf(" Its last error line: %q.", line)
		}
		return usererr.New("Exec Credential Plugin Failed", detail+" Run the command by hand to see why.")
	}
	var cred struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     *struct {
			Token                 string `json:"token"`
			ClientCertificateData string `json:"clientCertificateData"`
			ClientKeyData         string `json:"clientKeyData"`
		} `json:"status"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &cred); err != nil || cred.Kind != "ExecCredential" {
		return usererr.New("Invalid Exec Credential",
			name+" did not print an ExecCredential (JSON with kind ExecCredential) on standard output.")
	}
	switch {
	case cred.APIVersion != e.APIVersion:
		return usererr.New("Invalid Exec Credential",
			fmt.Sprintf("%s printed an ExecCredential of version %q, but exec.api_version is %q. Set api_version to the version the plugin speaks.", name, cred.APIVersion, e.APIVersion))
	case cred.Status == nil || (cred.Status.Token == "" && cred.Status.ClientCertificateData == ""):
		return usererr.New("Invalid Exec Credential",
			name+" printed an ExecCredential without a token or a client certificate in its status.")
	case (cred.Status.ClientCertificateData == "") != (cred.Status.ClientKeyData == ""):
		return usererr.New("Invalid Exec Credential",
			name+" printed only one of clientCertificateData and clientKeyData; both are needed.")
	}
	return nil
}

// execInfo is the KUBERNETES_EXEC_INFO client-go passes to the plugin: a non-interactive
// ExecCredential request, with the cluster when the kubeconfig asks for provideClusterInfo.
func execInfo(cfg *rest.Config) (string, error) {
	e := cfg.ExecProvider
	req := clientauthv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: e.APIVersion, Kind: "ExecCredential"},
		Spec:     clientauthv1.ExecCredentialSpec{Interactive: false},
	}
	if e.ProvideClusterInfo {
		c, err := rest.ConfigToExecCluster(cfg)
		if err != nil {
			return "", usererr.New("Invalid Exec Block",
				fmt.Sprintf("The cluster information for the exec credential plugin %q cannot be built (%s).", e.Command, scrub(err)))
		}
		req.Spec.Cluster = &clientauthv1.Cluster{
			Server: c.Server, TLSServerName: c.TLSServerName, InsecureSkipTLSVerify: c.InsecureSkipTLSVerify,
			CertificateAuthorityData: c.CertificateAuthorityData, ProxyURL: c.ProxyURL, DisableCompression: c.DisableCompression,
		}
	}
	b, err := json.Marshal(req)
	return string(b), err
}

// lastLine is the last non-empty line of a plugin's standard error, cut short, with the values
// of its exec env removed (they are often secrets).
func lastLine(stderr string, env []clientcmdapi.ExecEnvVar) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	for _, v := range env {
		if v.Value != "" {
			line = strings.ReplaceAll(line, v.Value, "(redacted)")
		}
	}
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return line
}
