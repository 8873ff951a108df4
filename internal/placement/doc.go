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
package placement
