//go:build tools

// Package tools records the Kubernetes commands built by scripts/tools-k8s.sh and
// scripts/tools-nodes.sh so that `go mod tidy` keeps their dependencies in
// go.mod/go.sum. It is never compiled (the "tools" build tag is never set).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
