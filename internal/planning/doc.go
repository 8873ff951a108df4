// Package planning is what the operator, `kubectl placement plan` and
// `lint` share between a PlacementMigration's spec and the placement
// engine: the conversion of the API's constraint and capacity into the
// engine's and of a migration into the intent the question is asked of
// (Intent; a change written straight into a workload is one too), the
// resolution of the spec's targets over a set of objects, the one
// question asked before each stage (Evaluate: another migration's
// claim, the engine's answers for the stage and the final stage, the hard
// stage's disruption pre-flight) and its outcome, the verdicts on what the
// cluster brings after success (disruptions, pods Pending), the plan
// recorded from the answers, and the next move of a rebalance.
//
// It reads nothing and writes nothing: the operator hands in its cache's
// objects and warm snapshot, the plugin what it read from the API or from
// files; what a verdict does to a migration (a condition, an event, a
// write) is the controller's.
package planning
