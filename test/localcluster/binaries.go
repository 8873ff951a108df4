package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// binaryNames are the files `make cluster-binaries` builds into bin/.
var binaryNames = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml",
}

// FindBinaries returns the directory holding the cluster binaries: the one
// PLACEMENT_GUARD_BIN or KUBEBUILDER_ASSETS names, else bin/ at the root of
// the module the working directory is in.
func FindBinaries() (string, error) {
	for _, env := range []string{"PLACEMENT_GUARD_BIN", "KUBEBUILDER_ASSETS"} {
		if dir := os.Getenv(env); dir != "" {
			return dir, checkBinaries(dir)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin")
	return dir, checkBinaries(dir)
}

func checkBinaries(dir string) error {
	var missing []error
	for _, name := range binaryNames {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster binaries missing in %s (build them with `make cluster-binaries`): %w", dir, errors.Join(missing...))
	}
	return nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			// Tool modules live below the operator module; keep climbing
			// past them to the operator's own go.mod.
			if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no directory above the working directory holds PROJECT and go.mod")
		}
		dir = parent
	}
}
