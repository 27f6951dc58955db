package crsbridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/gradual-dev/terraform-provider-gradual/internal/apply"
)

func TestHealthText(t *testing.T) {
	obj := func(name, status string) apply.ObjectStatus {
		return apply.ObjectStatus{Object: apply.ObjectRef{Group: "apps", Kind: "Deployment", Namespace: "kube-system", Name: name}, Status: status, Message: "0 of 1 ready"}
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"ready", nil, "healthy"},
		{"one not ready", &apply.NotReadyError{Objects: []apply.ObjectStatus{obj("cni", "InProgress")}}, "not ready: Deployment kube-system/cni: InProgress: 0 of 1 ready"},
		{"many, a few named", &apply.NotReadyError{Objects: []apply.ObjectStatus{obj("a", "Failed"), obj("b", "InProgress"), obj("c", "InProgress"), obj("d", "InProgress"), obj("e", "InProgress")}},
			"2 more"},
		{"unreadable", &apply.NotReadyError{Objects: []apply.ObjectStatus{{Object: apply.ObjectRef{Kind: "ConfigMap", Name: "x"}, Status: "Unknown", Unreadable: true}}},
			"health not read: the cluster did not answer"},
		{"no connection", errors.New(`cluster "kwok-4": kubeconfig Secret not found`), `health not read: cluster "kwok-4": kubeconfig Secret not found`},
	} {
		if got := HealthText(c.err); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want it to contain %q", c.name, got, c.want)
		}
	}
}

func TestJoinerSaysItsHealth(t *testing.T) {
	j := Joiner{Cluster: "kwok-4", Modules: []Given{{Module: "cni", Revision: "r1", Applied: true}}, Health: "healthy"}
	if got, want := j.String(), "cni r1; healthy"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	j.Health = ""
	if got, want := j.String(), "cni r1"; got != want {
		t.Errorf("unread: %q, want %q", got, want)
	}
}
