package utils

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deployedOperatorAccount closes the user name config/policies match the
// operator by: the ServiceAccount config/default deploys the manager as,
// in any namespace.
const deployedOperatorAccount = "':placement-guard-controller-manager'"

// InstallPolicies creates the admission policies of config/policies (the
// directory dir) and their bindings, naming user's ServiceAccount as the
// operator, so that a suite's operator runs under the policies a user is
// told to install.
func InstallPolicies(ctx context.Context, c client.Client, dir, user string) error {
	account := user[strings.LastIndex(user, ":")+1:]
	return createKustomized(ctx, c, dir, func(raw []byte) []byte {
		return []byte(strings.ReplaceAll(string(raw), deployedOperatorAccount, "':"+account+"'"))
	})
}
