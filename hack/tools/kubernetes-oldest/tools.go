//go:build tools

// Package tools pins the oldest supported kube-apiserver.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
