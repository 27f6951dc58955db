package crsbridge

import (
	"reflect"
	"testing"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		in   []Input
		want []Choice
	}{
		{"a verified revision moves the bridge",
			[]Input{{Module: "cni", Configured: "r2", Verified: true, Held: "r1"}},
			[]Choice{{Module: "cni", Revision: "r2", Moved: true}}},
		{"the first verified revision starts it",
			[]Input{{Module: "cni", Configured: "r1", Verified: true}},
			[]Choice{{Module: "cni", Revision: "r1", Moved: true}}},
		{"already held: nothing to write",
			[]Input{{Module: "cni", Configured: "r1", Verified: true, Held: "r1"}},
			[]Choice{{Module: "cni", Revision: "r1"}}},
		{"a revision in flight (not verified anywhere) keeps the last verified",
			[]Input{{Module: "cni", Configured: "r2", Held: "r1"}},
			[]Choice{{Module: "cni", Revision: "r1", Why: "r2 is not verified on any cluster yet; joiners get r1, the last verified"}}},
		{"nothing verified yet: nothing carried",
			[]Input{{Module: "cni", Configured: "r1"}},
			[]Choice{{Module: "cni", Why: "r1 is not verified on any cluster yet"}}},
		{"an invalid revision is never handed out, even verified somewhere before",
			[]Input{{Module: "cni", Configured: "r2", Verified: true, Held: "r1", Invalid: []string{"r2"}}},
			[]Choice{{Module: "cni", Revision: "r1", Why: "r2 is recorded invalid; joiners get r1, the last verified"}}},
		{"a held revision recorded invalid since is dropped",
			[]Input{{Module: "cni", Configured: "r2", Held: "r1", Invalid: []string{"r1"}}},
			[]Choice{{Module: "cni", Why: "r1, which the bridge held, is recorded invalid and r2 is not verified yet"}}},
		{"invalid and never held",
			[]Input{{Module: "cni", Configured: "r1", Invalid: []string{"r1"}}},
			[]Choice{{Module: "cni", Why: "r1 is recorded invalid"}}},
		{"a module whose dependency is not carried is not carried",
			[]Input{
				{Module: "crds", Configured: "a1"},
				{Module: "app", DependsOn: []string{"crds"}, Configured: "b1", Verified: true},
			},
			[]Choice{
				{Module: "crds", Why: "a1 is not verified on any cluster yet"},
				{Module: "app", Why: `module "crds", which it depends on, is not carried`},
			}},
		{"dependencies carried: in order",
			[]Input{
				{Module: "crds", Configured: "a2", Verified: true, Held: "a1"},
				{Module: "app", DependsOn: []string{"crds"}, Configured: "b1", Held: "b1"},
			},
			[]Choice{{Module: "crds", Revision: "a2", Moved: true}, {Module: "app", Revision: "b1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide:\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
