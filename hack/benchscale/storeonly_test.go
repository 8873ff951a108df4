package main

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func TestConfigureAPIServerSetsEachFlagAndRefusesOneWithoutAValue(t *testing.T) {
	env := &envtest.Environment{}
	if err := configureAPIServer(env, []string{"--feature-gates=A=false", "v=4"}); err != nil {
		t.Fatal(err)
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	if got := args.Get("feature-gates").Get(nil); len(got) != 1 || got[0] != "A=false" {
		t.Errorf("feature-gates: got %v", got)
	}
	if got := args.Get("v").Get(nil); len(got) != 1 || got[0] != "4" {
		t.Errorf("v: got %v", got)
	}
	if err := configureAPIServer(&envtest.Environment{}, []string{"feature-gates"}); err == nil {
		t.Error("a flag without a value was taken")
	}
}
