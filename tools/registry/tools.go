//go:build tools

// Package tools records the registry command built by scripts/tools-nodes.sh so
// that `go mod tidy` keeps its dependencies. Never compiled.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
