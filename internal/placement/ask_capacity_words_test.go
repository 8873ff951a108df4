package placement

import "testing"

// What a capacity condition says reads at once: what qualifies beside
// what is needed, or what is missing.
func TestCapacityIsWordedForAReader(t *testing.T) {
	for _, tc := range []struct {
		c               Capacity
		found, shortage string
	}{
		{Capacity{QualifyingNodes: 4, RequiredNodes: 2, QualifyingDomains: 4, RequiredDomains: 2},
			"4 qualifying nodes (2 needed) in 4 domains (2 needed)", ""},
		{Capacity{QualifyingNodes: 1, RequiredNodes: 1, QualifyingDomains: 1, RequiredDomains: 1},
			"1 qualifying node (1 needed) in 1 domain (1 needed)", ""},
		{Capacity{QualifyingNodes: 1, RequiredNodes: 2, QualifyingDomains: 1, RequiredDomains: 2, Selector: "role=data"},
			"1 qualifying node (2 needed) in 1 domain (2 needed)", "1 of 2 qualifying nodes (role=data)"},
		{Capacity{QualifyingNodes: 3, RequiredNodes: 3, QualifyingDomains: 2, RequiredDomains: 3},
			"3 qualifying nodes (3 needed) in 2 domains (3 needed)", "2 of 3 qualifying topology.kubernetes.io/zone domains"},
	} {
		if got := tc.c.Found(); got != tc.found {
			t.Errorf("Found() = %q, want %q", got, tc.found)
		}
		if got := tc.c.Shortfall("topology.kubernetes.io/zone"); got != tc.shortage {
			t.Errorf("Shortfall() = %q, want %q", got, tc.shortage)
		}
	}
}
