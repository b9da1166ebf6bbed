package netguard

import (
	"errors"
	"net/netip"
	"net/url"
	"testing"
)

func TestBlockedReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr   string
		why    string // "" = public
		always bool
	}{
		{"8.8.8.8", "", false},
		{"1.1.1.1", "", false},
		{"2606:4700:4700::1111", "", false},
		{"127.0.0.1", "loopback", false},
		{"127.255.0.9", "loopback", false},
		{"::1", "loopback", false},
		{"::ffff:127.0.0.1", "loopback", false},
		{"10.1.2.3", "private", false},
		{"172.16.0.1", "private", false},
		{"172.31.255.255", "private", false},
		{"172.32.0.1", "", false},
		{"192.168.1.1", "private", false},
		{"100.64.0.1", "shared (CGNAT)", false},
		{"100.127.255.255", "shared (CGNAT)", false},
		{"100.128.0.1", "", false},
		{"169.254.169.254", "link-local", false}, // cloud metadata
		{"fe80::1%eth0", "link-local", false},
		{"fd00::1", "private (unique local)", false},
		{"fc00::1", "private (unique local)", false},
		{"0.0.0.0", "unspecified (\"this network\")", true},
		{"::", "unspecified", true},
		{"224.0.0.1", "multicast", true},
		{"ff02::1", "multicast", true},
		{"255.255.255.255", "reserved", true},
		{"64:ff9b::7f00:1", "loopback (embedded in 64:ff9b::7f00:1)", false}, // NAT64 of 127.0.0.1
		{"64:ff9b::808:808", "", false},                                      // NAT64 of 8.8.8.8
		{"2002:a00:1::", "private (embedded in 2002:a00:1::)", false},        // 6to4 of 10.0.0.1
	}
	for _, tt := range tests {
		why, always := Blocked(netip.MustParseAddr(tt.addr))
		if why != tt.why || always != tt.always {
			t.Errorf("Blocked(%s) = %q, %v; want %q, %v", tt.addr, why, always, tt.why, tt.always)
		}
	}
}

func TestDialPolicy(t *testing.T) {
	t.Parallel()
	allow, err := ParseAllowList([]string{"127.0.0.1:9000", "10.0.0.0/8", "fd00::5", "tools.internal"})
	if err != nil {
		t.Fatal(err)
	}
	strict := Policy{Allow: allow}
	private := Policy{AllowPrivate: true, Allow: allow}
	tests := []struct {
		address       string
		strict, loose bool // allowed by strict, by private
	}{
		{"8.8.8.8:443", true, true},
		{"127.0.0.1:9000", true, true}, // explicitly allowed address and port
		{"127.0.0.1:9001", false, true},
		{"127.0.0.2:9000", false, true},
		{"10.9.9.9:80", true, true}, // CIDR entry
		{"[fd00::5]:80", true, true},
		{"[fd00::6]:80", false, true},
		{"192.168.0.1:80", false, true},
		{"169.254.169.254:80", false, true},
		{"0.0.0.0:80", false, false}, // never, not even with AllowPrivate
		{"224.0.0.1:80", false, false},
		{"not an address", false, false},
	}
	for _, tt := range tests {
		if err := strict.Control("tcp", tt.address, nil); (err == nil) != tt.strict {
			t.Errorf("strict control(%s) = %v, want allowed %v", tt.address, err, tt.strict)
		}
		if err := private.Control("tcp", tt.address, nil); (err == nil) != tt.loose {
			t.Errorf("AllowPrivate control(%s) = %v, want allowed %v", tt.address, err, tt.loose)
		}
	}
	var blocked *AddressError
	if err := strict.Control("tcp", "127.0.0.1:1", nil); !errors.As(err, &blocked) {
		t.Errorf("refusal is %T, want *AddressError", err)
	}
}

func TestAllowListURLs(t *testing.T) {
	t.Parallel()
	allow, err := ParseAllowList([]string{"Tools.Example.com.", "*.corp.example", "api.example.org:8443", "10.0.0.0/8", "127.0.0.1:8080", "[fd00::1]:80", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url  string
		want bool
	}{
		{"https://tools.example.com/x", true},
		{"http://TOOLS.example.com:9999/x", true}, // a name entry allows every port
		{"https://tools.example.com./x", true},
		{"https://evil.tools.example.com/x", false},
		{"https://a.corp.example/x", true},
		{"https://a.b.corp.example/x", true},
		{"https://corp.example/x", false},
		{"https://xcorp.example/x", false},
		{"https://api.example.org:8443/x", true},
		{"https://api.example.org/x", false}, // port 443
		{"http://10.200.0.1/x", true},
		{"http://11.0.0.1/x", false},
		{"http://127.0.0.1:8080/x", true},
		{"http://127.0.0.1:8081/x", false},
		{"http://127.0.0.1/x", false},
		{"http://[fd00::1]:80/x", true},
		{"http://[fd00::1]/x", true}, // default port 80
		{"https://[fd00::1]/x", false},
		{"http://192.0.2.7:1234/x", true},
		{"http://[::ffff:192.0.2.7]/x", true},
		{"http://[fe80::1%25eth0]/x", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := allow.AllowsURL(u); got != tt.want {
			t.Errorf("AllowsURL(%s) = %v, want %v", tt.url, got, tt.want)
		}
	}
	empty, _ := ParseAllowList(nil)
	if u, _ := url.Parse("http://anything.example/"); !empty.AllowsURL(u) {
		t.Error("an empty allow-list refuses a host")
	}
}

func TestAllowListBarePorts(t *testing.T) {
	t.Parallel()
	allow, err := ParseAllowList([]string{"pypi.org", "*.example.com:8443", "files.example.org:8080", "10.0.0.0/8", "127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	allow.RestrictBarePorts(80, 443)
	tests := []struct {
		host string
		port uint16
		want bool
	}{
		{"pypi.org", 443, true},
		{"PyPI.org.", 80, true},
		{"pypi.org", 22, false}, // a bare name means the web ports only
		{"a.example.com", 8443, true},
		{"a.example.com", 443, false},
		{"example.com", 8443, false},
		{"files.example.org", 8080, true},
		{"files.example.org", 80, false},
		{"10.1.2.3", 443, true},
		{"10.1.2.3", 8080, false},
		{"127.0.0.1", 9000, true},
		{"::ffff:127.0.0.1", 9000, true}, // the same address, spelled as IPv6
		{"127.0.0.1", 9001, false},
		{"fe80::1%eth0", 80, false},
	}
	for _, tt := range tests {
		if got := allow.AllowsHost(tt.host, tt.port); got != tt.want {
			t.Errorf("AllowsHost(%s, %d) = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
	var empty *AllowList
	if empty.AllowsHost("pypi.org", 443) {
		t.Error("a nil list allows a host")
	}
}

func TestAllowListCovers(t *testing.T) {
	t.Parallel()
	op, err := ParseAllowList([]string{"pypi.org", "files.pythonhosted.org:443", "*.example.com", "*.corp.example:8443", "10.0.0.0/8", "127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	op.RestrictBarePorts(80, 443)
	narrow := (&AllowList{}).RestrictBarePorts(80, 443)
	tests := []struct {
		entry string
		want  bool
	}{
		{"pypi.org", true},
		{"pypi.org:443", true},
		{"pypi.org:22", false},
		{"files.pythonhosted.org", false}, // asks for port 80 too
		{"files.pythonhosted.org:443", true},
		{"a.example.com", true},
		{"a.b.example.com:443", true},
		{"*.example.com", true},
		{"*.a.example.com:80", true},
		{"example.com", false},
		{"*.com", false},
		{"x.corp.example:8443", true},
		{"x.corp.example", false},
		{"10.1.0.0/16", true}, // a smaller range, on the same ports
		{"10.1.2.3:443", true},
		{"10.0.0.0/7", false},
		{"127.0.0.1:9000", true},
		{"127.0.0.1", false},
		{"evil.org", false},
		{"not a host", false},
	}
	for _, tt := range tests {
		if got := op.Covers(tt.entry, narrow); got != tt.want {
			t.Errorf("Covers(%q) = %v, want %v", tt.entry, got, tt.want)
		}
	}
	for _, bad := range []string{"", "a b", "*.", "host:0", "host:99999", "fe80::1%eth0", "10.0.0.0/99"} {
		if ValidEntry(bad) == nil {
			t.Errorf("ValidEntry(%q) = nil, want an error", bad)
		}
	}
}
