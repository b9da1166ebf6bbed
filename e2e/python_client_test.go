package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPythonClient runs the Python client package's tests
// (clients/python/tests) against the binary under test, in parallel with the
// rest of the suite. They need Debian's python3 with python3-httpx and
// python3-pytest; with CI=true their absence is a failure.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python := os.Getenv("AGENTD_TEST_PYTHON")
	if python == "" {
		// Debian's interpreter, where the python3-* packages are; a
		// python3 earlier on PATH (pyenv, a venv) may not have them.
		python = "/usr/bin/python3"
	}
	if out, err := exec.Command(python, "-c", "import httpx, pytest").CombinedOutput(); err != nil {
		missing(t, "the Python client's tests need "+python+" with httpx and pytest (apt-get install python3-httpx python3-pytest): "+strings.TrimSpace(string(out)))
	}
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
	cmd.Dir = "../clients/python"
	cmd.Env = append(os.Environ(), "AGENTD_BIN="+binPath, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Log("pytest: " + lines[len(lines)-1])
}
