package gates

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// upstreamCRD is a tool's own CRD, read from the tool's module at a pinned
// version: the Go module proxy serves the repository, CRDs included.
type upstreamCRD struct {
	module, version, path string
}

// The tools whose CRDs the fleet files must pass: Argo CD v3.5.4 and Flux's
// kustomize-controller v1.9.6, the newest releases whose modules the proxy
// hands to Go 1.26.
var upstreamCRDs = []upstreamCRD{
	{"github.com/fluxcd/kustomize-controller", "v1.9.6", "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"},
	{"github.com/argoproj/argo-cd/v3", "v3.5.4", "manifests/crds/applicationset-crd.yaml"},
}

// notServed are the kinds of config/fleet whose CRDs cannot be had here:
// the module proxy refuses the tools' modules (403), so the files are
// checked by test/health against the tools' documented shapes instead.
// The PlacementMigrations a ManifestWork carries are still applied.
var notServed = map[schema.GroupKind]string{
	{Group: "work.open-cluster-management.io", Kind: "ManifestWork"}:           "open-cluster-management.io/api",
	{Group: "work.open-cluster-management.io", Kind: "ManifestWorkReplicaSet"}: "open-cluster-management.io/api",
	{Group: "config.karmada.io", Kind: "ResourceInterpreterCustomization"}:     "github.com/karmada-io/karmada",
}

// path is the CRD file in the module cache, downloading the module through
// the proxy when it is not there yet.
func (u upstreamCRD) file() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", u.module+"@"+u.version).Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	if err != nil || m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("download %s@%s: %s %v", u.module, u.version, m.Error, err)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(u.path)), nil
}
