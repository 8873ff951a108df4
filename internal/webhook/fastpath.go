package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
)

// placementFields is what the fast path reads of a workload's serialized
// form: the fields that make a change worth judging, kept as raw bytes, and
// the two metadata entries the check reads (its opt-out label and the
// record of an adopted constraint). Most requests (an image, an
// annotation, an environment variable) stop here.
type placementFields struct {
	// admissionLabel is the placementguard.io/admission label's value,
	// adopted the placementguard.io/adopted annotation's.
	admissionLabel, adopted            string
	replicas, strategy, updateStrategy []byte
	// required are the pod template's required anti-affinity terms and
	// spreads its topology spread constraints; preferred its preferred
	// anti-affinity terms, where Adopt keeps a term's soft form.
	required, spreads, preferred []byte
	// stranding are the other fields of the pod template that decide
	// where its pods may go, beside a hard constraint: a change to any of
	// them can strand the pods the constraint keeps apart.
	stranding strandingFields
}

// strandingFields are the pod template's fields, other than its hard
// constraints, that decide where its pods may land (admission.Stranding
// says which of their changes count): its labels (which a constraint's
// selector may be waiting for), node name, node selector and node
// affinity (the pool), pod affinity, tolerations, priority class, runtime
// class, scheduling gates, host network, volumes, and what its containers
// request and the ports they bind (and its overhead).
type strandingFields struct {
	labels, nodeName, nodeSelector, nodeAffinity, podAffinity, tolerations, priorityClassName, overhead []byte
	runtimeClassName, schedulingGates, hostNetwork, volumes                                             []byte
	// requests are each container's resources, then each init
	// container's, as their lists hold them; ports each one's ports.
	requests, initRequests, ports, initPorts [][]byte
}

func (s strandingFields) equal(o strandingFields) bool {
	return bytes.Equal(s.labels, o.labels) && bytes.Equal(s.nodeName, o.nodeName) && bytes.Equal(s.nodeSelector, o.nodeSelector) &&
		bytes.Equal(s.nodeAffinity, o.nodeAffinity) && bytes.Equal(s.podAffinity, o.podAffinity) &&
		bytes.Equal(s.tolerations, o.tolerations) && bytes.Equal(s.priorityClassName, o.priorityClassName) && bytes.Equal(s.overhead, o.overhead) &&
		bytes.Equal(s.runtimeClassName, o.runtimeClassName) && bytes.Equal(s.schedulingGates, o.schedulingGates) &&
		bytes.Equal(s.hostNetwork, o.hostNetwork) && bytes.Equal(s.volumes, o.volumes) &&
		slices.EqualFunc(s.requests, o.requests, bytes.Equal) && slices.EqualFunc(s.initRequests, o.initRequests, bytes.Equal) &&
		slices.EqualFunc(s.ports, o.ports, bytes.Equal) && slices.EqualFunc(s.initPorts, o.initPorts, bytes.Equal)
}

// readPlacement reads the placement fields of a serialized workload. It
// walks the object's members and skips, bytes at a time, every value it
// does not need (managedFields, status, the containers, kubectl's
// last-applied annotation: most of a request) instead of decoding the
// whole object: a request that changes no placement field is answered in
// the time it takes to scan the bytes. Keys match exactly, as the API
// server's own decoder matches them.
func readPlacement(raw []byte) (placementFields, error) {
	var f placementFields
	err := members(raw, func(key, value []byte) error {
		switch string(key) {
		case "metadata":
			return members(value, f.readMetadata)
		case "spec":
			return members(value, f.readSpec)
		}
		return nil
	})
	return f, err
}

// readMetadata reads a member of the workload's metadata.
func (f *placementFields) readMetadata(key, value []byte) error {
	switch string(key) {
	case "labels":
		return stringEntry(value, pgv1.AdmissionLabel, &f.admissionLabel)
	case "annotations":
		return stringEntry(value, adoption.Annotation, &f.adopted)
	}
	return nil
}

// readSpec reads a member of the workload's spec.
func (f *placementFields) readSpec(key, value []byte) error {
	switch string(key) {
	case "replicas":
		f.replicas = value
	case "strategy":
		f.strategy = value
	case "updateStrategy":
		f.updateStrategy = value
	case "template":
		return members(value, func(key, value []byte) error {
			switch string(key) {
			case "metadata":
				return path(value, []string{"labels"}, func(labels []byte) error {
					f.stranding.labels = labels
					return nil
				})
			case "spec":
				return members(value, f.readPodSpec)
			}
			return nil
		})
	}
	return nil
}

// readPodSpec reads a member of the pod template's spec.
func (f *placementFields) readPodSpec(key, value []byte) error {
	switch string(key) {
	case "topologySpreadConstraints":
		f.spreads = value
	case "affinity":
		return members(value, func(key, value []byte) error {
			switch string(key) {
			case "podAntiAffinity":
				return members(value, func(key, value []byte) error {
					switch string(key) {
					case "requiredDuringSchedulingIgnoredDuringExecution":
						f.required = value
					case "preferredDuringSchedulingIgnoredDuringExecution":
						f.preferred = value
					}
					return nil
				})
			case "nodeAffinity":
				f.stranding.nodeAffinity = value
			case "podAffinity":
				f.stranding.podAffinity = value
			}
			return nil
		})
	case "nodeName":
		f.stranding.nodeName = value
	case "nodeSelector":
		f.stranding.nodeSelector = value
	case "runtimeClassName":
		f.stranding.runtimeClassName = value
	case "schedulingGates":
		f.stranding.schedulingGates = value
	case "hostNetwork":
		f.stranding.hostNetwork = value
	case "volumes":
		f.stranding.volumes = value
	case "tolerations":
		f.stranding.tolerations = value
	case "priorityClassName":
		f.stranding.priorityClassName = value
	case "overhead":
		f.stranding.overhead = value
	case "containers":
		return containerFieldsOf(value, &f.stranding.requests, &f.stranding.ports)
	case "initContainers":
		return containerFieldsOf(value, &f.stranding.initRequests, &f.stranding.initPorts)
	}
	return nil
}

// containerFieldsOf reads each container's resources and ports of a list
// of containers into resources and ports, one entry per container (nil
// for one without).
func containerFieldsOf(list []byte, resources, ports *[][]byte) error {
	*resources, *ports = nil, nil
	return elements(list, func(container []byte) error {
		var r, p []byte
		err := members(container, func(key, value []byte) error {
			switch string(key) {
			case "resources":
				r = value
			case "ports":
				p = value
			}
			return nil
		})
		*resources, *ports = append(*resources, r), append(*ports, p)
		return err
	})
}

// mayBeHard reports whether the workload may carry a required
// anti-affinity term or a DoNotSchedule spread; false only when it
// certainly carries neither.
func (f placementFields) mayBeHard() bool {
	return nonEmpty(f.required) || bytes.Contains(f.spreads, []byte(`"DoNotSchedule"`))
}

// unchanged reports a change that leaves every field the check judges as
// it was, byte for byte as the API server serialized both.
func unchanged(old, new placementFields) bool {
	return bytes.Equal(old.replicas, new.replicas) && bytes.Equal(old.strategy, new.strategy) && bytes.Equal(old.updateStrategy, new.updateStrategy) &&
		bytes.Equal(old.required, new.required) && bytes.Equal(old.spreads, new.spreads) && old.stranding.equal(new.stranding)
}

func nonEmpty(raw []byte) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null")) && !bytes.Equal(raw, []byte("[]"))
}

// path calls found with the value at keys inside the object data, if
// there is one.
func path(data []byte, keys []string, found func([]byte) error) error {
	if len(keys) == 0 {
		return found(data)
	}
	return members(data, func(key, value []byte) error {
		if string(key) == keys[0] {
			return path(value, keys[1:], found)
		}
		return nil
	})
}

// stringEntry sets *out to the string value of key in the object data
// (a map of strings), when it has one.
func stringEntry(data []byte, key string, out *string) error {
	return members(data, func(k, value []byte) error {
		if string(k) != key {
			return nil
		}
		if bytes.Equal(value, []byte("null")) {
			*out = ""
			return nil
		}
		if len(value) < 2 || value[0] != '"' {
			return fmt.Errorf("%s: not a string", key)
		}
		if bytes.IndexByte(value, '\\') < 0 {
			*out = string(value[1 : len(value)-1])
			return nil
		}
		return json.Unmarshal(value, out)
	})
}

var errNotJSON = errors.New("malformed JSON")

// members calls visit with the key and the raw value of each member of the
// JSON object data, in order; null has none. Keys are compared as written:
// a key with escapes is unescaped first.
func members(data []byte, visit func(key, value []byte) error) error {
	i := skipSpace(data, 0)
	if bytes.HasPrefix(data[i:], []byte("null")) {
		return nil
	}
	if i >= len(data) || data[i] != '{' {
		return fmt.Errorf("%w: an object expected", errNotJSON)
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return fmt.Errorf("%w: a key expected", errNotJSON)
		}
		end, err := skipString(data, i)
		if err != nil {
			return err
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(data[i:end], &k); err != nil {
				return fmt.Errorf("%w: %w", errNotJSON, err)
			}
			key = []byte(k)
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("%w: ':' expected", errNotJSON)
		}
		start := skipSpace(data, i+1)
		if end, err = skipValue(data, start); err != nil {
			return err
		}
		if err := visit(key, data[start:end]); err != nil {
			return err
		}
		i = skipSpace(data, end)
		switch {
		case i < len(data) && data[i] == ',':
			i = skipSpace(data, i+1)
		case i < len(data) && data[i] == '}':
			return nil
		default:
			return fmt.Errorf("%w: ',' or '}' expected", errNotJSON)
		}
	}
}

// elements calls visit with the raw value of each element of the JSON
// array data, in order; null has none.
func elements(data []byte, visit func(value []byte) error) error {
	i := skipSpace(data, 0)
	if bytes.HasPrefix(data[i:], []byte("null")) {
		return nil
	}
	if i >= len(data) || data[i] != '[' {
		return fmt.Errorf("%w: an array expected", errNotJSON)
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return nil
	}
	for {
		end, err := skipValue(data, i)
		if err != nil {
			return err
		}
		if err := visit(data[i:end]); err != nil {
			return err
		}
		i = skipSpace(data, end)
		switch {
		case i < len(data) && data[i] == ',':
			i = skipSpace(data, i+1)
		case i < len(data) && data[i] == ']':
			return nil
		default:
			return fmt.Errorf("%w: ',' or ']' expected", errNotJSON)
		}
	}
}

// skipValue returns where the JSON value beginning at i ends.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, fmt.Errorf("%w: a value expected", errNotJSON)
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated", errNotJSON)
	}
	j := i
	for j < len(data) && !isDelimiter(data[j]) {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("%w: a value expected", errNotJSON)
	}
	return j, nil
}

// skipString returns where the JSON string beginning at i ends.
func skipString(data []byte, i int) (int, error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errNotJSON)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r') {
		i++
	}
	return i
}

func isDelimiter(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' || c == '\r'
}
