// Package fleet runs one question against many clusters: the members of a
// fleet (the contexts of a kubeconfig, a directory of kubeconfigs, or a
// directory of cluster snapshots), each asked concurrently under a bound
// and a timeout, and the verdicts ranked so that the worst decides an
// exit code. It knows nothing of what the question is.
package fleet
