package netguard

import (
	"testing"
)

// FuzzAllowList feeds entries and hosts through parsing, matching and
// coverage. It must never panic; every valid entry covers itself; and what
// an entry covered by a list allows, the list allows too.
func FuzzAllowList(f *testing.F) {
	for _, e := range []string{"pypi.org", "*.example.com:443", "10.0.0.0/8", "127.0.0.1:9000", "[fd00::1]:80", "::ffff:10.0.0.1", "a..b", "*.", "x:0", "::ffff:0:0/96"} {
		f.Add(e, "*.example.com", "a.example.com", uint16(443))
	}
	f.Fuzz(func(t *testing.T, entry, operator, host string, port uint16) {
		narrow := (&AllowList{}).RestrictBarePorts(80, 443)
		op, err := ParseAllowList([]string{operator})
		if err != nil {
			return
		}
		op.RestrictBarePorts(80, 443)
		if ValidEntry(entry) != nil {
			if op.Covers(entry, narrow) {
				t.Fatalf("invalid entry %q is covered", entry)
			}
			return
		}
		self, err := ParseAllowList([]string{entry})
		if err != nil {
			t.Fatalf("ValidEntry accepted %q, ParseAllowList did not: %v", entry, err)
		}
		self.RestrictBarePorts(80, 443)
		if !self.Covers(entry, narrow) {
			t.Fatalf("entry %q does not cover itself", entry)
		}
		if op.Covers(entry, narrow) && self.AllowsHost(host, port) && !op.AllowsHost(host, port) {
			t.Fatalf("%q covers %q, which allows %s port %d that %q does not", operator, entry, host, port, operator)
		}
	})
}
