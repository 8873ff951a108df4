package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Member is one cluster of a fleet: reached through a kubeconfig context,
// or read from a snapshot directory. Err says why it cannot be asked
// (a context the kubeconfig lacks, a kubeconfig that does not parse); the
// member still gets its row.
type Member struct {
	// Name is the member's row label: the context's name, or the base name
	// of its kubeconfig file or snapshot directory.
	Name string
	// SnapshotDir is the snapshot to read instead of an API server.
	SnapshotDir string
	// Err is set when the member cannot be asked at all.
	Err error

	config  *clientcmdapi.Config
	context string
}

// Live reports whether the member is reached through an API server.
func (m Member) Live() bool { return m.config != nil }

// Context is the name of the kubeconfig context the member is reached
// through, "" for a snapshot.
func (m Member) Context() string { return m.context }

// Namespace is the namespace the member's context names, "" for none.
func (m Member) Namespace() string {
	if c := m.contextOf(); c != nil {
		return c.Namespace
	}
	return ""
}

// Server is the URL of the member's API server, "" for a snapshot or a
// context without a cluster.
func (m Member) Server() string {
	c := m.contextOf()
	if c == nil {
		return ""
	}
	if cl := m.config.Clusters[c.Cluster]; cl != nil {
		return cl.Server
	}
	return ""
}

func (m Member) contextOf() *clientcmdapi.Context {
	if m.config == nil {
		return nil
	}
	return m.config.Contexts[m.context]
}

// KubeconfigDir are the members of a directory of kubeconfig files, one per
// file through its current context, named by the file's base name without
// its extension, in name order. Hidden files and directories are skipped.
// Relative paths in a file (certificates, keys, token files, an exec
// plugin given with a directory) are read from the file's directory, as
// kubectl reads them.
func KubeconfigDir(dir string) ([]Member, error) {
	files, err := entries(dir, false)
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, f := range files {
		m := Member{Name: strings.TrimSuffix(f, filepath.Ext(f))}
		config, err := loadKubeconfig(filepath.Join(dir, f))
		switch {
		case err != nil:
			m.Err = fmt.Errorf("read kubeconfig %s: %w", f, err)
		case config.CurrentContext == "" || config.Contexts[config.CurrentContext] == nil:
			m.Err = fmt.Errorf("kubeconfig %s names no current context that it holds", f)
		default:
			m.config, m.context = config, config.CurrentContext
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no kubeconfig file", dir)
	}
	return out, nil
}

// loadKubeconfig reads one kubeconfig file with its relative paths made
// absolute against the file's directory.
func loadKubeconfig(path string) (*clientcmdapi.Config, error) {
	config, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	if err := clientcmd.ResolveLocalPaths(config); err != nil {
		return nil, err
	}
	return config, nil
}

// SnapshotDir are the members of a directory of cluster snapshots, one per
// subdirectory, named by it, in name order.
func SnapshotDir(dir string) ([]Member, error) {
	subdirs, err := entries(dir, true)
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(subdirs))
	for _, d := range subdirs {
		out = append(out, Member{Name: d, SnapshotDir: filepath.Join(dir, d)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no snapshot directory (one subdirectory per cluster)", dir)
	}
	return out, nil
}

// entries are the names of dir's visible directories (dirs) or files, sorted.
func entries(dir string, dirs bool) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the fleet directory: %w", err)
	}
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			continue
		}
		isDir := de.IsDir()
		if de.Type()&os.ModeSymlink != 0 {
			if fi, err := os.Stat(filepath.Join(dir, de.Name())); err == nil {
				isDir = fi.IsDir()
			}
		}
		if isDir == dirs {
			out = append(out, de.Name())
		}
	}
	return out, nil
}
