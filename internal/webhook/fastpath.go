package webhook

import (
	"bytes"
	"encoding/json"
)

// placementFields is what the fast path reads of a workload's serialized
// form: the fields that make a change worth judging, kept as raw bytes.
// Decoding this costs a fraction of decoding the whole object, and most
// requests (an image, an annotation, resources) stop here.
type placementFields struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Replicas       json.RawMessage `json:"replicas"`
		Strategy       json.RawMessage `json:"strategy"`
		UpdateStrategy json.RawMessage `json:"updateStrategy"`
		Template       struct {
			Spec struct {
				Affinity struct {
					PodAntiAffinity struct {
						Required json.RawMessage `json:"requiredDuringSchedulingIgnoredDuringExecution"`
					} `json:"podAntiAffinity"`
				} `json:"affinity"`
				Spreads json.RawMessage `json:"topologySpreadConstraints"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// readPlacement reads the placement fields of a serialized workload.
func readPlacement(raw []byte) (placementFields, error) {
	var f placementFields
	err := json.Unmarshal(raw, &f)
	return f, err
}

// mayBeHard reports whether the workload may carry a required
// anti-affinity term or a DoNotSchedule spread; false only when it
// certainly carries neither.
func (f placementFields) mayBeHard() bool {
	spec := f.Spec.Template.Spec
	return nonEmpty(spec.Affinity.PodAntiAffinity.Required) || bytes.Contains(spec.Spreads, []byte(`"DoNotSchedule"`))
}

// unchanged reports a change that leaves every field the check judges as
// it was, byte for byte as the API server serialized both.
func unchanged(old, new placementFields) bool {
	o, n := old.Spec, new.Spec
	return bytes.Equal(o.Replicas, n.Replicas) && bytes.Equal(o.Strategy, n.Strategy) && bytes.Equal(o.UpdateStrategy, n.UpdateStrategy) &&
		bytes.Equal(o.Template.Spec.Affinity.PodAntiAffinity.Required, n.Template.Spec.Affinity.PodAntiAffinity.Required) &&
		bytes.Equal(o.Template.Spec.Spreads, n.Template.Spec.Spreads)
}

func nonEmpty(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null")) && !bytes.Equal(raw, []byte("[]"))
}
