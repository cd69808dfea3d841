// Command coredns is CoreDNS with only the plugins kubeadm's default Corefile uses
// (errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload,
// loadbalance): the cluster add-on the real-node tier's kubeadm deploys and upgrades.
// CoreDNS's own main links every plugin (cloud DNS providers among them); this one
// builds in a fraction of the time. Built by scripts/tools-nodes.sh, once per go.mod:
// go.mod pins the version the target release's kubeadm deploys, from.mod the starting one's.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
