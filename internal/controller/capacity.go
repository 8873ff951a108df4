package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// checkCapacity waits, patching nothing, until the qualifying nodes exist.
func (s *scope) checkCapacity(c placement.Capacity, stage placement.Stage) (outcome, bool) {
	pm := s.pm
	nodes := c.Nodes
	if len(nodes) > 10 {
		nodes = nodes[:10]
	}
	pm.Status.Capacity = &pgv1.CapacityStatus{
		QualifyingNodes: int32(c.QualifyingNodes), RequiredNodes: int32(c.RequiredNodes),
		QualifyingDomains: int32(c.QualifyingDomains), RequiredDomains: int32(c.RequiredDomains),
		Nodes: nodes, Summary: c.Summary(),
	}
	key := s.constraint.TopologyKey()
	if !c.Enough() {
		msg := fmt.Sprintf("%s; waiting for them before the %s stage, nothing has been changed", c.Shortfall(key), stage)
		if stage == placement.StageHard {
			msg = fmt.Sprintf("%s; the Soft stage stays applied until they exist", c.Shortfall(key))
		}
		setCondition(pm, s.now, pgv1.ConditionCapacityAvailable, metav1.ConditionFalse, pgv1.ReasonInsufficientCapacity, msg)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionFeasible)
		pm.Status.Hazards = nil
		return outcome{reason: pgv1.ReasonWaitingForCapacity, message: msg}, true
	}
	setCondition(pm, s.now, pgv1.ConditionCapacityAvailable, metav1.ConditionTrue, pgv1.ReasonCapacityFound,
		c.Found())
	return outcome{}, false
}
