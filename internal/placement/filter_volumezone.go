package placement

import corev1 "k8s.io/api/core/v1"

// volumeZoneLabels are the PV labels VolumeZone compares with the node's.
var volumeZoneLabels = []string{
	corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
}

// volumeZonesMatch is VolumeZone's check: a node with no zone or region
// label at all admits any volume (a single-zone cluster); otherwise each
// zone and region label of a bound volume must hold the node's value, the
// beta labels compared with the node's GA ones when the node lacks them.
func volumeZonesMatch(bound []*corev1.PersistentVolume, node *corev1.Node) bool {
	labelled := false
	for _, key := range volumeZoneLabels {
		if _, ok := node.Labels[key]; ok {
			labelled = true
			break
		}
	}
	if !labelled {
		return true
	}
	for _, v := range bound {
		for _, key := range volumeZoneLabels {
			want, ok := v.Labels[key]
			if !ok {
				continue
			}
			have, ok := node.Labels[key]
			if !ok {
				have, ok = node.Labels[gaTopologyLabel(key)]
			}
			if !ok || !zoneValueMatches(want, have) {
				return false
			}
		}
	}
	return true
}

// gaTopologyLabel is the GA label a beta zone or region label became.
func gaTopologyLabel(key string) string {
	switch key {
	case corev1.LabelFailureDomainBetaZone:
		return corev1.LabelTopologyZone
	case corev1.LabelFailureDomainBetaRegion:
		return corev1.LabelTopologyRegion
	}
	return key
}

// zoneValueMatches compares a PV zone label, which may list several zones
// separated by "__", with the node's zone.
func zoneValueMatches(pvValue, nodeValue string) bool {
	for _, z := range splitZones(pvValue) {
		if z == nodeValue {
			return true
		}
	}
	return false
}

func splitZones(v string) []string {
	var out []string
	start := 0
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '_' && v[i+1] == '_' {
			out = append(out, v[start:i])
			start = i + 2
			i++
		}
	}
	return append(out, v[start:])
}
