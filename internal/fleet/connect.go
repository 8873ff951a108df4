package fleet

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Connect is what the command line sets for every member it reaches.
type Connect struct {
	// RequestTimeout bounds each request to a member (--request-timeout);
	// 0 leaves the member's own.
	RequestTimeout time.Duration
	// Impersonate is who every request acts as (--as, --as-group,
	// --as-uid), on every member.
	Impersonate rest.ImpersonationConfig
	// DisableCompression asks every member for uncompressed responses
	// (--disable-compression).
	DisableCompression bool
	// Terminal is the command's standard input when it is a terminal,
	// nil when it is not: a credential plugin that asks a person gets
	// it, one plugin at a time.
	Terminal io.Reader
	// Stderr is where credential plugins write what they say.
	Stderr io.Writer
}

// RESTConfig is the client configuration of a live member. A member whose
// user runs an exec credential plugin has it run here, within ctx: its
// process ends with ctx (see credentials.go), so that a plugin that hangs
// costs the member its row and outlives nothing.
func (m Member) RESTConfig(ctx context.Context, c Connect) (*rest.Config, error) {
	if m.config == nil {
		return nil, fmt.Errorf("%s is a snapshot, not a cluster", m.Name)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*m.config, m.context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", m.context, err)
	}
	if c.RequestTimeout > 0 {
		cfg.Timeout = c.RequestTimeout
	}
	if c.Impersonate.UserName != "" {
		cfg.Impersonate = c.Impersonate
	}
	if c.DisableCompression {
		cfg.DisableCompression = true
	}
	if cfg.ExecProvider != nil {
		if err := runCredentialPlugin(ctx, cfg, c); err != nil {
			return nil, fmt.Errorf("kubeconfig context %q: %w", m.context, err)
		}
	}
	return cfg, nil
}
