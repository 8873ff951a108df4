//go:build tools

// Package tools pins golangci-lint v2 with kube-api-linter built in as a
// module (the binary kube-api-linter ships for that), built into bin/.
package tools

import _ "sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter"
