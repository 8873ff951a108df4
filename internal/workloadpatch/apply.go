// Package workloadpatch writes a migration's entry into workloads with
// server-side apply, owning only the fields it adds: one anti-affinity term
// or one spread constraint. Everything else in the workload, including
// other terms, node affinity and other managers' fields (other migrations'
// entries among them), is left alone, and applying nothing gives back
// exactly what was there.
//
// It builds apply configurations and reads API answers; it makes no call
// itself, so the reconciler decides when to dry-run and when to apply.
package workloadpatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/placement-guard/placement-guard/internal/targets"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// ManagerPrefix starts the field manager of every migration.
const ManagerPrefix = "placement-guard/"

// maxManagerLength is the API server's bound on a field manager's name.
const maxManagerLength = 128

// FieldManager is the field manager a migration writes with: stable for a
// migration's name (a migration deleted and created again by GitOps owns
// what it wrote before) and distinct between migrations, so that two
// migrations of one workload never release each other's entries.
func FieldManager(migration string) string {
	name := ManagerPrefix + migration
	if len(name) <= maxManagerLength {
		return name
	}
	sum := sha256.Sum256([]byte(migration))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	return name[:maxManagerLength-len(suffix)] + suffix
}

// MigrationOf names the migration behind a field manager, if it is one of
// ours; a shortened name is returned as it appears in the manager.
func MigrationOf(manager string) (string, bool) {
	return strings.CutPrefix(manager, ManagerPrefix)
}

// Target names a workload to patch. A UID, when set, is a precondition:
// the API server refuses the write if the workload was deleted or
// re-created, and never creates it.
type Target struct {
	Kind      pgv1.WorkloadKind
	Namespace string
	Name      string
	UID       types.UID
	// ResourceVersion, when set, is the version of the workload the write
	// was decided on: the API server refuses the write (a 409 without a
	// field manager conflict, IsPreconditionFailed) once the workload has
	// changed since, so a decision read from a cache behind the API server
	// writes nothing.
	ResourceVersion string
}

func (t Target) String() string { return fmt.Sprintf("%s %s/%s", t.Kind, t.Namespace, t.Name) }

// ApplyConfiguration is the apply configuration that leaves exactly entry
// in the workload's pod template under the caller's field manager: the
// fields of entry (a pod spec holding only the migration's anti-affinity
// term or spread constraint) are set, and any field the manager owned
// before and entry lacks is released. A nil entry releases everything.
func ApplyConfiguration(t Target, entry *corev1.PodSpec) (runtime.ApplyConfiguration, error) {
	kind := targets.KindNamed(string(t.Kind))
	if kind == nil {
		return nil, fmt.Errorf("build the entry for %s: unsupported kind", t)
	}
	ac := kind.NewApplyConfiguration()
	metadata := map[string]any{"name": t.Name, "namespace": t.Namespace}
	if t.UID != "" {
		metadata["uid"] = t.UID
	}
	if t.ResourceVersion != "" {
		metadata["resourceVersion"] = t.ResourceVersion
	}
	// Every kind holds the pod template at spec.template: the apply
	// configuration is written in the API's JSON shape, which is exact.
	obj := map[string]any{"apiVersion": "apps/v1", "kind": string(t.Kind), "metadata": metadata}
	if entry != nil {
		spec, err := toApplyConfiguration(entry)
		if err != nil {
			return nil, fmt.Errorf("build the entry for %s: %w", t, err)
		}
		obj["spec"] = map[string]any{"template": map[string]any{"spec": spec}}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("build the entry for %s: %w", t, err)
	}
	if err := json.Unmarshal(raw, ac); err != nil {
		return nil, fmt.Errorf("build the entry for %s: %w", t, err)
	}
	return ac, nil
}

// toApplyConfiguration converts the constraint fields of a pod spec; apply
// configurations are the API's JSON shape, so a JSON round trip is exact.
func toApplyConfiguration(spec *corev1.PodSpec) (*corev1ac.PodSpecApplyConfiguration, error) {
	fields := map[string]any{}
	if spec.Affinity != nil {
		fields["affinity"] = spec.Affinity
	}
	if len(spec.TopologySpreadConstraints) > 0 {
		fields["topologySpreadConstraints"] = spec.TopologySpreadConstraints
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode constraint: %w", err)
	}
	ac := &corev1ac.PodSpecApplyConfiguration{}
	if err := json.Unmarshal(raw, ac); err != nil {
		return nil, fmt.Errorf("decode constraint as apply configuration: %w", err)
	}
	return ac, nil
}

// GenerationOf reads the workload's generation from an apply
// configuration the API server has answered into.
func GenerationOf(ac runtime.ApplyConfiguration) int64 {
	var answer struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
	}
	raw, err := json.Marshal(ac)
	if err != nil || json.Unmarshal(raw, &answer) != nil {
		return 0
	}
	return answer.Metadata.Generation
}
