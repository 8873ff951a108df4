package placement

import (
	"fmt"
	"sort"
	"strings"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A hazard is the engine's finding, in the words every reader of it shares:
// its stable name, whether it blocks, the workload it is about, and its fix.

// Hazard types, stable names a person and a dashboard can key on: the API
// reports them in status.hazards and condition reasons, and this is the one
// place they are declared.
const (
	HazardInsufficientCapacity = "InsufficientCapacity"
	HazardRolloutDeadlock      = "RolloutDeadlock"
	HazardSelectorOverlap      = "SelectorOverlap"
	HazardVolumeZonePinning    = "VolumeZonePinning"
	HazardAffinityClobber      = "AffinityClobber"
	HazardUnschedulable        = "Unschedulable"
	HazardOnDeleteStrategy     = "OnDeleteStrategy"
	HazardSpreadEndsSkewed     = "SpreadEndsSkewed"
	// HazardStrandsOthers is a required anti-affinity term aimed at
	// other namespaces' pods that would leave some of them unplaceable.
	HazardStrandsOthers = "StrandsOthers"
	// HazardNotPredicted is for information: a filter the engine does not
	// model decides where the workload's pods go.
	HazardNotPredicted = "NotPredicted"
	// HazardUnknownScheduler is a workload whose pods name a scheduler
	// the engine was given no profile of: nothing it predicts of them
	// is the scheduler's.
	HazardUnknownScheduler = "UnknownScheduler"
)

// Hazard is one finding. Blocking findings stop a migration; the others are
// for a person to know.
type Hazard struct {
	Type     string
	Blocking bool
	// Workload is the workload found to be at risk; the zero reference
	// for findings about the cluster.
	Workload pgv1.TargetRef
	Message  string
	// Fix is the change that removes the hazard, in few words, worded for
	// the workload's kind; the Message ends with it, or with a longer form
	// of it. Whoever words the hazard again (the admission check, in 256
	// characters) takes the fix from here, never words one itself.
	Fix string
}

// withFix is the hazard with its fix, also ending its message.
func withFix(h *Hazard, fix string) *Hazard {
	return withFixes(h, fix, fix)
}

// withFixes is the hazard with its fix in few words, its message ending
// with the fix at length.
func withFixes(h *Hazard, short, long string) *Hazard {
	h.Fix = short
	h.Message += " Fix: " + long
	return h
}

// DescribeCounts lists "domain=count" in domain order.
func DescribeCounts(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}
