// Package placement is placement-guard's judgement: given a snapshot of the
// cluster, can a workload's pods be placed with a candidate constraint, will
// its rollout complete, and if not, exactly why; and, once the constraint
// is in place, which deletion costs keep it through a scale-down and which
// pod to move to make it true again.
//
// It reproduces the kube-scheduler's filters that decide where a pod may go
// (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit,
// VolumeBinding's PV node affinity, PodTopologySpread and InterPodAffinity,
// in the scheduler's order) and reports a "no" in the scheduler's own words.
// It makes no API call and knows nothing of controllers, so it can be tested
// against the real scheduler and benchmarked on its own.
//
// # Layers
//
// The package is six layers, each a group of files named by its prefix,
// from the ground up. A file uses its own layer and those below it, never
// one above (`make verify` holds it: hack/layerrule).
//
//   - model_: what the engine is asked about and answers in: a Workload,
//     a Constraint and how a stage writes it into a template, the resources
//     and affinity terms of a pod, a Hazard's names and shape, and the pods
//     it tells apart (placeholders, simulated pods, the marks it reads).
//   - index_: the Snapshot, the incremental index of the cluster: nodes,
//     pods as trimmed records shared between pods of one template, the
//     objects the filters read, interned topologies, the journal that undoes
//     a simulation's changes, and what it keeps between questions for the
//     layers above and forgets when the cluster changes.
//   - filter_: the scheduler's filters, evaluating one pod over the
//     snapshot: node filters, resources, ports, volumes and their limits,
//     inter-pod (anti-)affinity and topology spread, in the scheduler's
//     order and words.
//   - score_: the scheduler's scoring of the nodes the filters pass, as a
//     profile configures it (the default profile's eight score plugins,
//     or a cluster's own weights and NodeResourcesFit strategy): each
//     plugin's PreScore state, Score, NormalizeScore and weight, and the
//     nodes of the best total, of which the scheduler picks one. The
//     parts that read other pods follow what a simulation binds.
//   - sim_: the simulations: the placer, each kind's rollout behind one
//     interface (sim_kind.go, a sim_kind_<name>.go per kind), the search of
//     a rollout's end states, the ReplicaSet controller's scale-down, drains
//     and node upgrades.
//   - ask_: the questions: Analyze and its hazards, capacity and the
//     request that asks an autoscaler for it, moves and deletion costs that
//     keep a constraint true, measurements of running pods, and why a pod is
//     Pending.
package placement
