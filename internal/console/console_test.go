package console

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// The vendored bundle is the one its README names: a changed file without
// a changed README (or the reverse) fails here.
func TestRedocBundleIsTheVendoredOne(t *testing.T) {
	readme, err := os.ReadFile("redoc/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(redocBundle)
	if !strings.Contains(string(readme), "`"+hex.EncodeToString(sum[:])+"`") {
		t.Errorf("redoc/README.md does not name the sha256 of redoc.standalone.js, %x", sum)
	}
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := c.assets[RedocFile]; !ok || a.contentType != "text/javascript; charset=utf-8" {
		t.Errorf("the bundle is not an asset: %+v", a)
	}
}

// The reference page's policy is the console's but for the two style
// hashes Redoc needs.
func TestDocsPolicyIsTheConsolesPlusStyleHashes(t *testing.T) {
	got := strings.Replace(docsContentSecurityPolicy,
		" 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=' 'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='", "", 1)
	if got != contentSecurityPolicy {
		t.Errorf("docs policy without its hashes:\n%s\nconsole policy:\n%s", got, contentSecurityPolicy)
	}
}
