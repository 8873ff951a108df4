// Package admission judges a change to a Deployment or StatefulSet that
// comes straight to the API server (a Helm upgrade, a GitOps sync, a
// kubectl apply) instead of as a PlacementMigration: every incident the
// project was built from began that way. It asks the question lint and the
// operator ask (planning.JudgeChange) against the cluster as it is, and
// words the answer as admission warnings, within the API server's bounds.
// It knows nothing of webhooks or reconcilers: the manager serves it, and
// the operator records its findings as Events.
package admission
