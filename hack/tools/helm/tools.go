//go:build tools

// Package tools pins helm, built from source into bin/ for the chart's tests.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
