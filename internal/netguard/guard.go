// Package netguard decides which addresses and hosts agentd's outbound
// connections may reach: http and mcp tools, webhooks, and the egress proxy
// of sandboxes all use it, so one policy holds for all of them.
//
// A host comes from a chat spec, that is from a client, and redirects come
// from whatever server it points at. Left alone, either could make agentd
// reach the cloud metadata service (169.254.169.254), the database, or an
// admin port on localhost. Two independent checks stand in the way:
//
//  1. An allow-list (when the operator sets one) is checked on the host and
//     port asked for: at create time, before every connection, and on every
//     redirect.
//  2. The address policy is checked on the IP address actually dialed, in
//     the dialer's Control hook, that is after DNS resolution. Checking a
//     name before resolving it would be useless: the name can resolve to
//     10.0.0.1, or resolve to a public address when checked and to a private
//     one when dialed (DNS rebinding). Because every connection goes through
//     the dialer, the check holds for all of them. For the same reason a
//     guarded transport never uses a proxy from the environment: the dialer
//     would then only ever see the proxy's address.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// specialRange is an address range that outbound connections may not reach.
type specialRange struct {
	prefix netip.Prefix
	why    string
	// always: refused even with AllowPrivate, since no server can
	// legitimately live there (0.0.0.0 reaches the local host on Linux).
	always bool
}

// specialRanges are the special-purpose ranges of the IANA IPv4 and IPv6
// registries that are not globally reachable, plus the embeddings of IPv4 in
// IPv6 handled in Blocked.
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

// Blocked says why a may not be dialed ("" if it may), and whether
// the refusal holds even when private addresses are allowed.
func Blocked(a netip.Addr) (why string, always bool) {
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
		if why, always := Blocked(v4); why != "" {
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

// AddressError is the dialer's refusal of an address.
type AddressError struct {
	Addr netip.AddrPort
	Why  string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("address %s is %s, and only public addresses may be reached unless the operator allows it", e.Addr, e.Why)
}

// Policy decides which addresses connections may reach.
type Policy struct {
	// AllowPrivate lets connections reach loopback, private and link-local
	// addresses (never the "always" ranges: unspecified, multicast, …).
	AllowPrivate bool
	// Allow exempts the addresses its address entries name; nil: none.
	Allow *AllowList
}

// Control is the net.Dialer Control hook: it runs for every connection
// attempt with the resolved address, before the connection is made.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %s %q: %w", network, address, err)
	}
	return p.Check(ap)
}

// Check is Control for an address already parsed.
func (p Policy) Check(ap netip.AddrPort) error {
	why, always := Blocked(ap.Addr())
	switch {
	case why == "":
		return nil
	case always:
		return &AddressError{Addr: ap, Why: why}
	case p.AllowPrivate || p.Allow.Exempts(ap):
		return nil
	default:
		return &AddressError{Addr: ap, Why: why}
	}
}

// entryKind is what an allow-list entry names.
type entryKind uint8

const (
	kindName   entryKind = iota // a host name
	kindSuffix                  // "*.example.com": every name below it
	kindPrefix                  // an IP address (as /32, /128) or a CIDR
)

// entry is one parsed allow-list entry. port 0: the list's bare ports.
type entry struct {
	kind   entryKind
	name   string // kindName: the name; kindSuffix: ".example.com"
	prefix netip.Prefix
	port   uint16
}

// AllowList is a parsed list of hosts: names, "*.domain" wildcards, IP
// addresses and CIDRs, each optionally with a port ("host:port",
// "*.domain:port", "ip:port", "[v6]:port").
type AllowList struct {
	entries []entry
	// barePorts are the ports an entry without a port allows; nil: any.
	barePorts []uint16
}

// ParseAllowList parses the entries, reporting every bad one. An entry
// without a port allows every port; see RestrictBarePorts.
func ParseAllowList(entries []string) (*AllowList, error) {
	a := &AllowList{}
	var errs []error
	for _, s := range entries {
		e, err := parseEntry(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allow-list entry %q: %w", s, err))
			continue
		}
		a.entries = append(a.entries, e)
	}
	return a, errors.Join(errs...)
}

// RestrictBarePorts makes entries without a port allow only ports (rather
// than every port) and returns a.
func (a *AllowList) RestrictBarePorts(ports ...uint16) *AllowList {
	a.barePorts = slices.Clone(ports)
	return a
}

// Len is the number of entries.
func (a *AllowList) Len() int {
	if a == nil {
		return 0
	}
	return len(a.entries)
}

// ValidEntry reports what is wrong with one allow-list entry (nil: it is
// valid).
func ValidEntry(s string) error {
	_, err := parseEntry(s)
	return err
}

// parseEntry parses one allow-list entry (case and a trailing dot do not
// matter).
func parseEntry(s string) (entry, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return entry{}, errors.New("not a valid CIDR")
		}
		p = p.Masked()
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		return entry{kind: kindPrefix, prefix: p}, nil
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return entry{}, errors.New("an address with a zone names a local interface")
		}
		ip = ip.Unmap()
		return entry{kind: kindPrefix, prefix: netip.PrefixFrom(ip, ip.BitLen())}, nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return entry{}, errors.New("port 0")
		}
		if ap.Addr().Zone() != "" {
			return entry{}, errors.New("an address with a zone names a local interface")
		}
		ip := ap.Addr().Unmap()
		return entry{kind: kindPrefix, prefix: netip.PrefixFrom(ip, ip.BitLen()), port: ap.Port()}, nil
	}
	host := s
	var port uint16
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return entry{}, errors.New("port must be a number from 1 to 65535")
		}
		host, port = h, uint16(n)
	}
	host = strings.TrimSuffix(host, ".")
	wildcard := strings.HasPrefix(host, "*.")
	if !validHostName(strings.TrimPrefix(host, "*.")) {
		return entry{}, errors.New("want a host name, *.domain, host:port, an IP address or a CIDR")
	}
	if wildcard {
		return entry{kind: kindSuffix, name: host[1:], port: port}, nil
	}
	return entry{kind: kindName, name: host, port: port}, nil
}

// portOK reports whether e allows port.
func (a *AllowList) portOK(e entry, port uint16) bool {
	if e.port != 0 {
		return e.port == port
	}
	return a.barePorts == nil || slices.Contains(a.barePorts, port)
}

// AllowsHost reports whether host (a name or an IP address, IPv6 without
// brackets) and port are on the list. Unlike AllowsURL, an empty list
// allows nothing.
func (a *AllowList) AllowsHost(host string, port uint16) bool {
	if a == nil {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	ip, err := netip.ParseAddr(host)
	if err == nil {
		if ip.Zone() != "" {
			return false // a zone names a local interface: never a remote host
		}
		ip = ip.Unmap()
	}
	for _, e := range a.entries {
		if !a.portOK(e, port) {
			continue
		}
		switch {
		case e.kind == kindPrefix && ip.IsValid() && e.prefix.Contains(ip):
			return true
		case e.kind == kindName && !ip.IsValid() && host == e.name:
			return true
		case e.kind == kindSuffix && !ip.IsValid() && strings.HasSuffix(host, e.name):
			return true
		}
	}
	return false
}

// AllowsURL reports whether u's host and port are on the list; an empty
// list allows every host (the address policy still applies).
func (a *AllowList) AllowsURL(u *url.URL) bool {
	if a.Len() == 0 {
		return true
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false
	}
	return a.AllowsHost(u.Hostname(), uint16(n))
}

// Exempts reports whether an address entry names ap explicitly, which lets
// it through the private-address rule of a Policy.
func (a *AllowList) Exempts(ap netip.AddrPort) bool {
	if a == nil {
		return false
	}
	ip := ap.Addr().WithZone("").Unmap()
	for _, e := range a.entries {
		if e.kind == kindPrefix && e.prefix.Contains(ip) && (e.port == 0 || e.port == ap.Port()) {
			return true
		}
	}
	return false
}

// Covers reports whether every host and port that the entry s allows under
// the bare ports of narrow is allowed by a too: how an operator's list
// bounds what a spec may ask for. An invalid s is covered by nothing.
func (a *AllowList) Covers(s string, narrow *AllowList) bool {
	e, err := parseEntry(s)
	if err != nil || a == nil {
		return false
	}
	var ports []uint16 // nil: every port
	switch {
	case e.port != 0:
		ports = []uint16{e.port}
	case narrow != nil && narrow.barePorts != nil:
		ports = narrow.barePorts
	}
	covered := func(port uint16, anyPort bool) bool {
		for _, o := range a.entries {
			if anyPort && (o.port != 0 || a.barePorts != nil) || !anyPort && !a.portOK(o, port) {
				continue
			}
			switch {
			case o.kind == kindPrefix && e.kind == kindPrefix:
				if o.prefix.Bits() <= e.prefix.Bits() && o.prefix.Contains(e.prefix.Addr()) {
					return true
				}
			case o.kind == kindName && e.kind == kindName:
				if o.name == e.name {
					return true
				}
			case o.kind == kindSuffix && (e.kind == kindName || e.kind == kindSuffix):
				if strings.HasSuffix(e.name, o.name) {
					return true
				}
			}
		}
		return false
	}
	if ports == nil {
		return covered(0, true)
	}
	for _, p := range ports {
		if !covered(p, false) {
			return false
		}
	}
	return true
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
