// Package clusterstate keeps the placement engine's view of the cluster
// warm on every replica: the snapshot (ClusterState), fed by the
// manager's informers for namespaces and storage and by feeds of its own
// for pods and nodes, decoded straight into the engine's records and paced
// while no migration is at work (Feeds); and the map from a change to the
// migrations it can concern (Router), which hurries the feeds while any is
// at work.
//
// It knows migrations only by name and by the Interest the reconciler
// records for each: it never reads a PlacementMigration, decides nothing
// about one and never writes to the cluster. The controller wires it into
// the manager's queue; cmd sets it up (Setup).
package clusterstate
