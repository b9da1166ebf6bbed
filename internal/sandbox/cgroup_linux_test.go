package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
)

// The sandboxes' parent cgroups are shared by every manager of an owner on
// the host, and a manager that closes with no sandbox left removes them: a
// sandbox another manager makes just then, in this process or another (the
// test suites run side by side), finds them gone. Its cgroup is made all
// the same, its parents made again.
func TestACgroupIsMadeAfterAnotherManagerRemovedItsParent(t *testing.T) {
	owner := make([]byte, 4)
	_, _ = rand.Read(owner)
	cg, err := openCgroups("test-" + hex.EncodeToString(owner))
	if err != nil {
		if ci() {
			t.Fatalf("CI=true and no cgroups for bwrap sandboxes: %v", err)
		}
		t.Skipf("no cgroups: %v", err)
	}
	other := *cg
	other.close() // another manager of the owner, its last sandbox gone
	parents := []string{cg.v2}
	if cg.v2 == "" {
		parents = parents[:0]
		for _, d := range cg.v1 {
			parents = append(parents, d)
		}
	}
	for _, d := range parents {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("parent %s still there after close (%v)", d, err)
		}
	}
	c, err := cg.create("run-1", 64<<20, 16, 0.5)
	if err != nil {
		t.Fatalf("create after the parent was removed: %v", err)
	}
	for _, d := range c.dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("cgroup %s: %v", d, err)
		}
	}
	c.remove()
	cg.close()
}
