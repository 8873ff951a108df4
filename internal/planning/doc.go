// Package planning is what the operator and the kubectl plugin share
// between a PlacementMigration's spec and the placement engine: the
// conversion of the API's constraint and capacity into the engine's, the
// resolution of the spec's targets over a set of objects, the questions
// asked of the engine for each stage, the plan recorded from its answers,
// and the next move of a rebalance. It reads nothing itself: the operator hands in its cache's
// objects and snapshot, the plugin what it read from the API or from files.
package planning
