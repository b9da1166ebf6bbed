package runtime_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
