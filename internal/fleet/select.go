package fleet

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Contexts are the members the named contexts of config reach, in the
// order given, each once. A name with a glob metacharacter (*, ?, [) is a
// pattern, matched as path.Match does against every context's name, its
// matches in name order; a pattern that matches nothing, or does not
// parse, is an error, since a fleet command run on fewer clusters than
// meant looks like success. A plain name config lacks is a member with
// its error: its row says so. all takes every context, by name.
func Contexts(config *clientcmdapi.Config, names []string, all bool) ([]Member, error) {
	known := make([]string, 0, len(config.Contexts))
	for name := range config.Contexts {
		known = append(known, name)
	}
	slices.Sort(known)
	if all {
		names = known
	}
	var out []Member
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		m := Member{Name: name, config: config, context: name}
		if config.Contexts[name] == nil {
			m.Err = fmt.Errorf("context %q is not in the kubeconfig", name)
		}
		out = append(out, m)
	}
	for _, name := range SplitNames(names, func(n string) bool { return config.Contexts[n] != nil }) {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !IsPattern(name) {
			add(name)
			continue
		}
		matched, err := matching(known, name)
		if err != nil {
			return nil, err
		}
		if len(matched) == 0 {
			return nil, fmt.Errorf("--contexts %q matches no context of the kubeconfig (it has %s)", name, listed(known))
		}
		for _, n := range matched {
			add(n)
		}
	}
	return out, nil
}

// Exclude leaves out the members whose name one of patterns matches.
func Exclude(members []Member, patterns []string) ([]Member, error) {
	patterns = SplitNames(patterns, func(n string) bool {
		return slices.ContainsFunc(members, func(m Member) bool { return m.Name == n })
	})
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("--exclude-contexts %q: %w", p, err)
		}
	}
	return slices.DeleteFunc(members, func(m Member) bool {
		return slices.ContainsFunc(patterns, func(p string) bool {
			ok, _ := path.Match(p, m.Name)
			return ok
		})
	}), nil
}

// SplitNames splits each value of a repeated flag at its commas, as kubectl
// splits a list flag, except a value that is itself a name (a context may
// hold a comma in its name): that one is kept whole.
func SplitNames(values []string, isName func(string) bool) []string {
	var out []string
	for _, v := range values {
		if isName(v) {
			out = append(out, v)
			continue
		}
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

// IsPattern reports whether name is a glob pattern rather than a name.
func IsPattern(name string) bool { return strings.ContainsAny(name, "*?[") }

// matching are the names pattern matches.
func matching(names []string, pattern string) ([]string, error) {
	var out []string
	for _, n := range names {
		ok, err := path.Match(pattern, n)
		if err != nil {
			return nil, fmt.Errorf("--contexts %q: %w", pattern, err)
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// listed names a few of names for a sentence.
func listed(names []string) string {
	const most = 8
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > most:
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// Repeat is a member left out because an earlier one asks the same API
// server the same question as the same user.
type Repeat struct {
	Member Member
	Of     string
}

// Distinct keeps the first of the live members that reach one API server
// as one user with one scope (the namespace a question is about, "" when
// it is about every namespace), and names the rest: two contexts that
// point at one cluster with the same credentials are asked once. Another
// user is another question: what it may read differs. Members with an
// error and snapshots are kept.
func Distinct(members []Member, scope func(Member) string) (kept []Member, repeats []Repeat) {
	first := map[string]string{}
	for _, m := range members {
		key := m.questionKey()
		if m.Err != nil || key == "" {
			kept = append(kept, m)
			continue
		}
		key += "\x00" + scope(m)
		if of, ok := first[key]; ok {
			repeats = append(repeats, Repeat{Member: m, Of: of})
			continue
		}
		first[key] = m.Name
		kept = append(kept, m)
	}
	return kept, repeats
}

// questionKey names the server and the user a live member reaches, ""
// for a snapshot or a context without a server.
func (m Member) questionKey() string {
	c := m.contextOf()
	server := m.Server()
	if c == nil || server == "" {
		return ""
	}
	user := m.config.AuthInfos[c.AuthInfo]
	if user == nil {
		user = &clientcmdapi.AuthInfo{}
	}
	u := user.DeepCopy()
	u.LocationOfOrigin, u.Extensions = "", nil
	identity, err := json.Marshal(u)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(server, "/") + "\x00" + string(identity)
}
