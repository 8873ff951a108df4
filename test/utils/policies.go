package utils

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deployedOperatorUser is the user config/policies names: the
// ServiceAccount config/default deploys the manager as.
const deployedOperatorUser = "system:serviceaccount:placement-guard-system:placement-guard-controller-manager"

// InstallPolicies creates the admission policies of config/policies (the
// directory dir) and their bindings, naming user as the operator, so that
// a suite's operator runs under the policies a user is told to install.
func InstallPolicies(ctx context.Context, c client.Client, dir, user string) error {
	return createKustomized(ctx, c, dir, func(raw []byte) []byte {
		return []byte(strings.ReplaceAll(string(raw), deployedOperatorUser, user))
	})
}
