package pgtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvSource, set to "testcontainers", makes pgtest start its Postgres as a
// container through testcontainers-go (any Docker-API engine: Docker, or
// Podman's service via DOCKER_HOST), ahead of AGENTD_TEST_DATABASE_URL and
// the local binaries. It is the path a developer with Docker takes; CI runs
// the end-to-end suite once more this way so that it is exercised for real.
// A container that cannot be started is then a test failure, never a skip:
// it was asked for explicitly.
const EnvSource = "AGENTD_TEST_POSTGRES"

// SourceTestcontainers is the value of EnvSource that selects containers.
const SourceTestcontainers = "testcontainers"

// EnvImage names the Postgres image for EnvSource=testcontainers; the
// default, DefaultImage, is what build-image.sh beside this file builds
// without a registry. Any image whose Postgres accepts the user "postgres"
// without a password on port 5432 works, postgres:16 among them (with
// POSTGRES_HOST_AUTH_METHOD=trust).
const EnvImage = "AGENTD_TEST_POSTGRES_IMAGE"

// DefaultImage is the locally built test image.
const DefaultImage = "agentd-postgres-test:latest"

// ctr is the one container of this test binary, like the local server.
var ctr struct {
	once sync.Once
	url  string
	err  error

	mu sync.Mutex
	c  testcontainers.Container
}

// containerURL starts the container on first use and returns its admin URL.
func containerURL() (string, error) {
	ctr.once.Do(func() {
		c, url, err := startContainer()
		ctr.url, ctr.err = url, err
		ctr.mu.Lock()
		ctr.c = c
		ctr.mu.Unlock()
	})
	return ctr.url, ctr.err
}

func startContainer() (testcontainers.Container, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := cmp.Or(os.Getenv(EnvImage), DefaultImage)
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        image,
			ExposedPorts: []string{"5432/tcp"},
			// Published on loopback only: the tests are its only clients.
			HostConfigModifier: func(hc *container.HostConfig) {
				loopback := netip.MustParseAddr("127.0.0.1")
				for port, bindings := range hc.PortBindings {
					if len(bindings) == 0 {
						bindings = []network.PortBinding{{}}
					}
					for i := range bindings {
						bindings[i].HostIP = loopback
					}
					hc.PortBindings[port] = bindings
				}
			},
			Env:    map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
			Labels: map[string]string{"agentd.pgtest": "1"},
			WaitingFor: wait.ForAll(
				wait.ForLog("database system is ready to accept connections"),
				wait.ForListeningPort("5432/tcp"),
			).WithDeadline(2 * time.Minute),
		},
		Started: true,
	})
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.Background(), testcontainers.StopTimeout(time.Second))
		}
		return nil, "", fmt.Errorf("start Postgres container from %s through testcontainers (%s=%s): %w; "+
			"build the image with internal/store/pgtest/build-image.sh, point DOCKER_HOST at the engine, "+
			"and without a registry set TESTCONTAINERS_RYUK_DISABLED=true", image, EnvSource, SourceTestcontainers, err)
	}
	port, err := c.MappedPort(ctx, "5432/tcp")
	if err != nil {
		_ = c.Terminate(context.Background(), testcontainers.StopTimeout(time.Second))
		return nil, "", fmt.Errorf("port of the Postgres container: %w", err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", port.Port())
	// The official image restarts once after initialising; wait until the
	// server answers for real.
	if err := waitConnect(url, time.Minute); err != nil {
		_ = c.Terminate(context.Background(), testcontainers.StopTimeout(time.Second))
		return nil, "", fmt.Errorf("the Postgres container: %w", err)
	}
	return c, url, nil
}

// waitConnect polls until url accepts a connection.
func waitConnect(url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := adminExec(url, "SELECT 1")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopContainer removes the container, if one was started. The data is
// throwaway, so it is not shut down gracefully.
func stopContainer() error {
	ctr.once.Do(func() { ctr.err = errors.New("container stopped") })
	ctr.mu.Lock()
	c := ctr.c
	ctr.c = nil
	ctr.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Terminate(context.Background(), testcontainers.StopTimeout(time.Second))
}
