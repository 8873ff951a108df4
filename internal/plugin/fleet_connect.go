package plugin

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// singleClusterFlags are kubectl's global flags that name one cluster, one
// user or one way to trust a server: across a fleet each member's own
// kubeconfig context decides these, and one value for every cluster is
// almost never what was meant, so a fleet command refuses them.
var singleClusterFlags = []struct {
	flag string
	set  func(*Options) bool
}{
	{"--context", func(o *Options) bool { return set(o.Config.Context) }},
	{"--cluster", func(o *Options) bool { return set(o.Config.ClusterName) }},
	{"--user", func(o *Options) bool { return set(o.Config.AuthInfoName) }},
	{"--server", func(o *Options) bool { return set(o.Config.APIServer) }},
	{"--token", func(o *Options) bool { return set(o.Config.BearerToken) }},
	{"--username", func(o *Options) bool { return set(o.Config.Username) }},
	{"--password", func(o *Options) bool { return set(o.Config.Password) }},
	{"--client-certificate", func(o *Options) bool { return set(o.Config.CertFile) }},
	{"--client-key", func(o *Options) bool { return set(o.Config.KeyFile) }},
	{"--certificate-authority", func(o *Options) bool { return set(o.Config.CAFile) }},
	{"--tls-server-name", func(o *Options) bool { return set(o.Config.TLSServerName) }},
	{"--insecure-skip-tls-verify", func(o *Options) bool { return o.Config.Insecure != nil && *o.Config.Insecure }},
	{"--proxy-url", func(o *Options) bool { return set(o.Config.ProxyURL) }},
}

func set(s *string) bool { return s != nil && *s != "" }

// refuseSingleClusterFlags is a usage error naming the first flag of
// singleClusterFlags the command line sets.
func refuseSingleClusterFlags(o *Options) error {
	for _, f := range singleClusterFlags {
		if !f.set(o) {
			continue
		}
		if f.flag == "--context" {
			return usagef("--context names one context, as in kubectl; across a fleet name them with --contexts (names or patterns), --all-contexts or --kubeconfig-dir")
		}
		return usagef("%s is one value for one cluster; across a fleet each cluster is reached as its kubeconfig context says: drop %s, or ask that cluster alone with --context", f.flag, f.flag)
	}
	return nil
}

// connect is what the command line sets for every member of a fleet:
// --request-timeout, impersonation (--as, --as-group, --as-uid,
// --as-user-extra) and --disable-compression, which mean the same on
// every cluster.
func (o *Options) connect() (fleet.Connect, error) {
	c := fleet.Connect{Stderr: o.ErrOut}
	if f, ok := o.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		c.Terminal = o.In
	}
	if set(o.Config.Timeout) && *o.Config.Timeout != "0" {
		d, err := parseRequestTimeout(*o.Config.Timeout)
		if err != nil {
			return c, err
		}
		c.RequestTimeout = d
	}
	if set(o.Config.Impersonate) {
		c.Impersonate.UserName = *o.Config.Impersonate
	}
	if set(o.Config.ImpersonateUID) {
		c.Impersonate.UID = *o.Config.ImpersonateUID
	}
	if o.Config.ImpersonateGroup != nil {
		c.Impersonate.Groups = *o.Config.ImpersonateGroup
	}
	if o.Config.ImpersonateUserExtra != nil {
		for _, extra := range *o.Config.ImpersonateUserExtra {
			key, value, ok := strings.Cut(extra, "=")
			if !ok {
				return c, usagef("--as-user-extra %q: give key=value, as in kubectl", extra)
			}
			if c.Impersonate.Extra == nil {
				c.Impersonate.Extra = map[string][]string{}
			}
			c.Impersonate.Extra[key] = append(c.Impersonate.Extra[key], value)
		}
	}
	if c.Impersonate.UserName == "" && (c.Impersonate.UID != "" || len(c.Impersonate.Groups) > 0 || len(c.Impersonate.Extra) > 0) {
		return c, usagef("--as-group, --as-uid and --as-user-extra need --as, as in kubectl")
	}
	if o.Config.DisableCompression != nil {
		c.DisableCompression = *o.Config.DisableCompression
	}
	return c, nil
}

// parseRequestTimeout reads --request-timeout as kubectl does: a duration,
// or a number of seconds.
func parseRequestTimeout(s string) (time.Duration, error) {
	if !strings.ContainsAny(s, "hmsuµn") {
		s += "s"
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usagef("--request-timeout %q: give a duration (30s, 1m) or a number of seconds", s)
	}
	return d, nil
}

// describeServer names a member's API server for a listing.
func describeServer(m fleet.Member) string {
	switch {
	case !m.Live():
		return m.SnapshotDir
	case m.Server() == "":
		return "<none>"
	}
	return m.Server()
}

// listFleet prints the clusters a fleet command would ask, one line each,
// and asks none: --list-clusters.
func listFleet(o *Options, f *fleetFlags) error {
	ms, err := f.members(o)
	if err != nil {
		return err
	}
	kept, repeats := fleet.Distinct(ms, func(m fleet.Member) string { return fleetNamespace(o, m) })
	repeated := map[string]string{}
	for _, r := range repeats {
		repeated[r.Member.Name] = r.Of
	}
	asked := map[string]bool{}
	for _, m := range kept {
		asked[m.Name] = true
	}
	tw := newTable(o.Out, false)
	tw.header("CLUSTER", "CONTEXT", "SERVER", "NAMESPACE", "NOTE")
	for _, m := range ms {
		note := "asked"
		switch {
		case m.Err != nil:
			note = "error: " + m.Err.Error()
		case repeated[m.Name] != "":
			note = fmt.Sprintf("the same server as %s: not asked again", repeated[m.Name])
		}
		ns := ""
		if m.Live() {
			ns = fleetNamespace(o, m)
		}
		tw.row(m.Name, m.Context(), describeServer(m), ns, note)
	}
	return tw.flush()
}
