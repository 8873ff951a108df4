// Package schedulerprofile reads the KubeSchedulerConfiguration a cluster's
// kube-scheduler runs and makes of the profile that places a workload's
// pods the placement engine's Profile: which score plugins run with which
// weights, NodeResourcesFit's scoring strategy, the plugins' arguments
// that move a pod's landing node, and the filters it turns off. What the
// engine cannot predict as the scheduler would (an out-of-tree plugin, an
// extender, a preFilter turned off, a DoNotSchedule default constraint)
// is an error that names it,
// never a silent default: an operator that predicts for a scheduler it
// does not model would be confidently wrong.
package schedulerprofile
