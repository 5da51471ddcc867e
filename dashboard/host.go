package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// allowAnyHost in Config.AllowedHosts turns the Host check off.
const allowAnyHost = "*"

// hostPolicy decides which Host headers the dashboard answers, against DNS
// rebinding: a page on a name the attacker controls, whose DNS answer then
// changes to this server's address, is same-origin with the dashboard in
// the victim's browser (its Origin and Sec-Fetch-Site say so), so only the
// Host header tells its requests apart.
//
// An IP literal and localhost are always answered: no one else's DNS can
// point them at this server. Any other name must be listed.
type hostPolicy struct {
	any bool
	// names are the allowed names (lower case, no trailing dot) with any
	// port; hostPorts the allowed name:port pairs.
	names, hostPorts map[string]bool
}

// newHostPolicy returns the policy that answers the default hosts and
// those of allowed (Config.AllowedHosts).
func newHostPolicy(allowed []string) (hostPolicy, error) {
	p := hostPolicy{names: map[string]bool{}, hostPorts: map[string]bool{}}
	for _, a := range allowed {
		if a == allowAnyHost {
			p.any = true
			continue
		}
		if strings.ContainsAny(a, "/@?#*") {
			return hostPolicy{}, fmt.Errorf("dashboard: allowed host %q: want a host name with an optional port (jobs.example.com or jobs.example.com:8443), not a URL", a)
		}
		name, port, err := splitHost(a)
		if err != nil {
			return hostPolicy{}, fmt.Errorf("dashboard: allowed host %q: %w", a, err)
		}
		if port == "" {
			p.names[name] = true
		} else {
			p.hostPorts[name+":"+port] = true
		}
	}
	return p, nil
}

// allows reports whether the dashboard answers a request whose Host header
// is host. An empty Host (HTTP/1.0) does not come from a browser.
func (p hostPolicy) allows(host string) bool {
	if p.any || host == "" {
		return true
	}
	name, port, err := splitHost(host)
	switch {
	case err != nil:
		return false
	case name == "localhost" || p.names[name]:
		return true
	case port != "" && p.hostPorts[name+":"+port]:
		return true
	}
	_, err = netip.ParseAddr(name)
	return err == nil
}

// splitHost splits a Host header (or an allowed host) into its name, in
// lower case without a trailing dot (or an IP address without brackets),
// and its port ("" if none).
func splitHost(host string) (name, port string, err error) {
	name = host
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", "", errors.New("missing ] after an IPv6 address")
		}
		name, port = host[1:end], host[end+1:]
		if ip, err := netip.ParseAddr(name); err != nil || !ip.Is6() {
			return "", "", fmt.Errorf("%q is not an IPv6 address", name)
		}
		if port != "" && port[0] != ':' {
			return "", "", errors.New("want a port after ]")
		}
		port = strings.TrimPrefix(port, ":")
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		name, port = host[:i], host[i+1:]
		if strings.Contains(name, ":") {
			return "", "", errors.New("an IPv6 address needs brackets")
		}
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return "", "", fmt.Errorf("port %q is not a number", port)
		}
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" {
		return "", "", errors.New("no host name")
	}
	return name, port, nil
}

// misdirected answers a request for a host the dashboard does not serve
// with 421 and what to set to serve it.
func (h *Handler) misdirected(w http.ResponseWriter, r *http.Request) {
	name, _, err := splitHost(r.Host)
	if err != nil {
		name = "NAME"
	}
	h.log.Warn("dashboard: refused a request for a host it does not serve (DNS rebinding?)",
		"host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path)
	http.Error(w, fmt.Sprintf("This dashboard does not answer to host %q, which could be a DNS rebinding attack. "+
		"To serve it under that name, add it to dashboard.Config.AllowedHosts, or run skipjack ui with --allowed-host %s.",
		r.Host, name), http.StatusMisdirectedRequest)
}
