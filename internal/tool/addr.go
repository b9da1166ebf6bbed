package tool

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// SSRF defence.
//
// A tool URL comes from a chat spec, that is from a client, and a tool's
// redirects come from whatever server it points at. Left alone, either could
// make agentd reach the cloud metadata service (169.254.169.254), the
// database, or an admin port on localhost, and hand the response to the
// model. Two independent checks stand in the way:
//
//  1. The allow-list (when the operator sets one) is checked on the URL's
//     host and port: at create time, before every call, and on every
//     redirect.
//  2. The address policy is checked on the IP address actually dialed, in
//     the dialer's Control hook, that is after DNS resolution. Checking a
//     name before resolving it would be useless: the name can resolve to
//     10.0.0.1, or resolve to a public address when checked and to a private
//     one when dialed (DNS rebinding). Because every connection — first
//     request, redirect, a new connection of the pool — goes through the
//     dialer, the check holds for all of them. For the same reason the
//     transport never uses a proxy from the environment: the dialer would
//     then only ever see the proxy's address.

// specialRange is an address range a tool may not reach.
type specialRange struct {
	prefix netip.Prefix
	why    string
	// always: refused even with AllowPrivate, since no tool server can
	// legitimately live there (0.0.0.0 reaches the local host on Linux).
	always bool
}

// specialRanges are the special-purpose ranges of the IANA IPv4 and IPv6
// registries that are not globally reachable, plus the embeddings of IPv4 in
// IPv6 handled in blockedReason.
var specialRanges = func() []specialRange {
	rs := []struct {
		cidr, why string
		always    bool
	}{
		{"0.0.0.0/8", "unspecified (\"this network\")", true},
		{"10.0.0.0/8", "private", false},
		{"100.64.0.0/10", "shared (CGNAT)", false},
		{"127.0.0.0/8", "loopback", false},
		{"169.254.0.0/16", "link-local", false},
		{"172.16.0.0/12", "private", false},
		{"192.0.0.0/24", "IETF protocol assignment", false},
		{"192.0.2.0/24", "documentation", true},
		{"192.168.0.0/16", "private", false},
		{"198.18.0.0/15", "benchmarking", false},
		{"198.51.100.0/24", "documentation", true},
		{"203.0.113.0/24", "documentation", true},
		{"224.0.0.0/4", "multicast", true},
		{"240.0.0.0/4", "reserved", true}, // includes 255.255.255.255
		{"::/128", "unspecified", true},
		{"::1/128", "loopback", false},
		{"64:ff9b:1::/48", "local-use NAT64", false},
		{"100::/64", "discard", true},
		{"2001::/32", "Teredo", true},
		{"2001:db8::/32", "documentation", true},
		{"fc00::/7", "private (unique local)", false},
		{"fe80::/10", "link-local", false},
		{"fec0::/10", "site-local", false},
		{"ff00::/8", "multicast", true},
	}
	out := make([]specialRange, len(rs))
	for i, r := range rs {
		out[i] = specialRange{prefix: netip.MustParsePrefix(r.cidr), why: r.why, always: r.always}
	}
	return out
}()

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: IPv4 in the last 32 bits
	sixToFour   = netip.MustParsePrefix("2002::/16")    // RFC 3056: IPv4 in bits 16–47
)

// blockedReason says why a may not be dialed ("" if it may), and whether
// the refusal holds even when private addresses are allowed.
func blockedReason(a netip.Addr) (why string, always bool) {
	// A zone ("fe80::1%eth0") makes Prefix.Contains false; an IPv4-mapped
	// IPv6 address (::ffff:127.0.0.1) reaches the IPv4 address.
	a = a.WithZone("").Unmap()
	if !a.IsValid() {
		return "invalid", true
	}
	// IPv6 addresses that carry an IPv4 address reach it through a
	// translator or tunnel: judge the IPv4 address.
	if nat64Prefix.Contains(a) || sixToFour.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if sixToFour.Contains(a) {
			v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
		if why, always := blockedReason(v4); why != "" {
			return why + " (embedded in " + a.String() + ")", always
		}
		return "", false
	}
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r.why, r.always
		}
	}
	return "", false
}

// blockedAddressError is the dialer's refusal of an address.
type blockedAddressError struct {
	addr netip.AddrPort
	why  string
}

func (e *blockedAddressError) Error() string {
	return fmt.Sprintf("address %s is %s, and tools may only reach public addresses unless the operator allows it", e.addr, e.why)
}

// dialPolicy decides which addresses tool connections may reach.
type dialPolicy struct {
	allowPrivate bool
	allow        *allowList
}

// control is the net.Dialer Control hook: it runs for every connection
// attempt with the resolved address, before the connection is made.
func (p dialPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %s %q: %w", network, address, err)
	}
	why, always := blockedReason(ap.Addr())
	switch {
	case why == "":
		return nil
	case always:
		return &blockedAddressError{addr: ap, why: why}
	case p.allowPrivate || p.allow.exempts(ap):
		return nil
	default:
		return &blockedAddressError{addr: ap, why: why}
	}
}

// allowList is the parsed Config.HTTPAllowHosts.
type allowList struct {
	names     map[string]bool         // host names, any port
	suffixes  []string                // ".example.com" for "*.example.com"
	hostPorts map[string]bool         // "name:port"
	addrPorts map[netip.AddrPort]bool // "ip:port"
	prefixes  []netip.Prefix          // IP addresses (as /32, /128) and CIDRs
	entries   int                     // number of entries; 0 means "any host"
}

// parseAllowList parses the entries, reporting every bad one.
func parseAllowList(entries []string) (*allowList, error) {
	a := &allowList{names: map[string]bool{}, hostPorts: map[string]bool{}, addrPorts: map[netip.AddrPort]bool{}}
	var errs []error
	for _, e := range entries {
		if err := a.add(strings.ToLower(strings.TrimSpace(e))); err != nil {
			errs = append(errs, fmt.Errorf("tool allow-list entry %q: %w", e, err))
		}
	}
	return a, errors.Join(errs...)
}

// add parses one entry.
func (a *allowList) add(e string) error {
	a.entries++
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return errors.New("not a valid CIDR")
		}
		a.prefixes = append(a.prefixes, p.Masked())
		return nil
	}
	if ip, err := netip.ParseAddr(e); err == nil {
		ip = ip.Unmap()
		a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
		return nil
	}
	if ap, err := netip.ParseAddrPort(e); err == nil {
		if ap.Port() == 0 {
			return errors.New("port 0")
		}
		a.addrPorts[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
		return nil
	}
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("port must be a number from 1 to 65535")
		}
	}
	host = strings.TrimSuffix(host, ".")
	wildcard := strings.HasPrefix(host, "*.")
	if !validHostName(strings.TrimPrefix(host, "*.")) {
		return errors.New("want a host name, *.domain, host:port, an IP address or a CIDR")
	}
	switch {
	case wildcard && port != "":
		return errors.New("a wildcard entry applies to every port; drop the port")
	case wildcard:
		a.suffixes = append(a.suffixes, host[1:])
	case port != "":
		a.hostPorts[net.JoinHostPort(host, port)] = true
	default:
		a.names[host] = true
	}
	return nil
}

// allowsURL reports whether u's host and port are on the list; an empty
// list allows every host (the address policy still applies).
func (a *allowList) allowsURL(u *url.URL) bool {
	if a.entries == 0 {
		return true
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return false // a zone names a local interface: never a tool host
		}
		ip = ip.Unmap()
		n, err := strconv.ParseUint(port, 10, 16)
		if err == nil && a.addrPorts[netip.AddrPortFrom(ip, uint16(n))] {
			return true
		}
		for _, p := range a.prefixes {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	if a.names[host] || a.hostPorts[net.JoinHostPort(host, port)] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// exempts reports whether an address entry names ap explicitly, which lets
// it through the private-address rule (see Config.HTTPAllowHosts).
func (a *allowList) exempts(ap netip.AddrPort) bool {
	ap = netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port())
	if a.addrPorts[ap] {
		return true
	}
	for _, p := range a.prefixes {
		if p.Contains(ap.Addr()) {
			return true
		}
	}
	return false
}

// validHostName reports whether s is a DNS name of letters, digits,
// hyphens and underscores in dot-separated labels.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
