package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// unmountUnder unmounts everything mounted below dir, deepest first. The
// bwrap sandbox, run as root, mounts a size-limited tmpfs on each chat's
// work dir under its work root and leaves it mounted when agentd stops
// (a chat's work dir outlives a restart), so a test that removes its work
// root must unmount them first: a mounted directory cannot be removed,
// and the mounts would pile up on the machine.
func unmountUnder(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	// The longer of two nested mount points is the inner one.
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
			// Busy (a sandbox process still in it): detach it, so that it
			// goes when the last user does.
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points below dir, from this process's
// mountinfo (proc(5)).
func mountsUnder(dir string) ([]string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if mp := unescapeMountPath(fields[4]); strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's escapes of space, tab, newline and
// backslash as three octal digits (\040).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestUnescapeMountPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/tmp/a`:             "/tmp/a",
		`/tmp/with\040space`: "/tmp/with space",
		`/tmp/back\134slash`: `/tmp/back\slash`,
		`/tmp/end\04`:        `/tmp/end\04`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}
