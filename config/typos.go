package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// minTypoLength is the length under which a setting's name is not judged
// for look-alikes: a variable one edit from PORT (PORTS, SORT, PWD is
// not far) is more likely another program's than a misspelling.
const minTypoLength = 5

// typos warns of each set variable that looks like a misspelt setting:
// one edit from a setting's name (a letter added, dropped, changed, or
// two swapped), or its name in another case. Such a variable is not read,
// so the setting it meant keeps its default; since it may just as well
// belong to another program sharing the environment, this is a warning,
// not a refusal. PRODAPI_ variables are left to unknown, which refuses
// them; Superdesk's own variables and Kubernetes' service links are
// never judged.
func (p *parser) typos(names []string, known map[string]bool) []string {
	var targets []string
	for _, s := range settings {
		if !s.PerResource && len(s.Name) >= minTypoLength {
			targets = append(targets, s.Name)
		}
	}
	var warnings []string
	for _, name := range slices.Sorted(slices.Values(names)) {
		if known[name] || strings.HasPrefix(name, "PRODAPI_") || p.otherProgram(name) {
			continue
		}
		for _, t := range targets {
			if looksLike(name, t) {
				warnings = append(warnings, fmt.Sprintf("%s is not a setting and is ignored: did you mean %s?", name, t))
				break
			}
		}
	}
	return warnings
}

// looksLike reports whether name is one edit from setting, or setting in
// another case.
func looksLike(name, setting string) bool {
	if strings.EqualFold(name, setting) {
		return name != setting
	}
	if len(name) < len(setting)-1 || len(name) > len(setting)+1 {
		return false
	}
	return editDistance(name, setting) == 1
}

// otherProgram reports whether the variable name, as set, belongs to
// Superdesk or Kubernetes rather than to prodapi.
func (p *parser) otherProgram(name string) bool {
	return slices.Contains(superdeskSettings, name) || serviceLink(name, p.getenv(name))
}

// serviceLinkName matches the variables Kubernetes gives a pod for each
// service of its namespace (enableServiceLinks, on by default), but for
// <SERVICE>_PORT: <SERVICE>_SERVICE_HOST, <SERVICE>_SERVICE_PORT,
// <SERVICE>_SERVICE_PORT_<PORT NAME>, and <SERVICE>_PORT_<n>_<PROTOCOL>
// with its _PROTO, _PORT and _ADDR.
var serviceLinkName = regexp.MustCompile(`_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// serviceLink reports whether a variable is one of a Kubernetes service's
// links: by its name, or for <SERVICE>_PORT by its value too
// (tcp://10.0.0.7:5500), as PRODAPI_PORT=5500 is a user's mistake to
// refuse while a service named prodapi sets PRODAPI_PORT=tcp://....
func serviceLink(name, value string) bool {
	if serviceLinkName.MatchString(name) {
		return true
	}
	scheme, _, ok := strings.Cut(value, "://")
	return strings.HasSuffix(name, "_PORT") && ok && (scheme == "tcp" || scheme == "udp" || scheme == "sctp")
}
