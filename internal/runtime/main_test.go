package runtime_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(fanOutReaderEnv); url != "" {
		// This process reads BenchmarkSSEFanOut's streams.
		os.Exit(fanOutReader(url))
	}
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
