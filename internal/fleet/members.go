package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
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

// RESTConfig is the client configuration of a live member.
func (m Member) RESTConfig() (*rest.Config, error) {
	if m.config == nil {
		return nil, fmt.Errorf("%s is a snapshot, not a cluster", m.Name)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*m.config, m.context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", m.context, err)
	}
	return cfg, nil
}

// Namespace is the namespace the member's context names, "" for none.
func (m Member) Namespace() string {
	if m.config == nil {
		return ""
	}
	if c := m.config.Contexts[m.context]; c != nil {
		return c.Namespace
	}
	return ""
}

// Contexts are the members the named contexts of config reach, in the
// order given, each once; all takes every context of config, by name.
// A name config lacks is a member with its error.
func Contexts(config *clientcmdapi.Config, names []string, all bool) []Member {
	if all {
		names = make([]string, 0, len(config.Contexts))
		for name := range config.Contexts {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	var out []Member
	seen := map[string]bool{}
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		m := Member{Name: name, config: config, context: name}
		if config.Contexts[name] == nil {
			m.Err = fmt.Errorf("context %q is not in the kubeconfig", name)
		}
		out = append(out, m)
	}
	return out
}

// KubeconfigDir are the members of a directory of kubeconfig files, one per
// file through its current context, named by the file's base name without
// its extension, in name order. Hidden files and directories are skipped.
func KubeconfigDir(dir string) ([]Member, error) {
	files, err := entries(dir, false)
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, f := range files {
		m := Member{Name: strings.TrimSuffix(f, filepath.Ext(f))}
		config, err := clientcmd.LoadFromFile(filepath.Join(dir, f))
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
