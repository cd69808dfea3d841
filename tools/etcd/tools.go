//go:build tools

// Package tools records the etcd server command built by scripts/tools-k8s.sh so
// that `go mod tidy` keeps its dependencies. Never compiled.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
