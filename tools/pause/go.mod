// The pod sandbox ("pause") process of the real-node tier's nodes: our own,
// built static by scripts/tools-nodes.sh. No dependencies.
module github.com/capi-upgrade-orchestrator/tools/pause

go 1.26.0
