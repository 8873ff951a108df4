//go:build tools

// Package tools pins crd-ref-docs, which writes docs/reference/api.md from api/.
package tools

import _ "github.com/elastic/crd-ref-docs"
