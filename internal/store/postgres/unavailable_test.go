package postgres

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// closedPortURL is a Postgres URL on a loopback port nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "postgres://agentd:secret@" + addr + "/agentd?sslmode=disable"
}

func TestOpenRetriesAnUnreachableDatabaseThenSaysSo(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := Open(t.Context(), Config{URL: closedPortURL(t), Logger: quiet, ConnectWait: time.Second})
	if !errors.Is(err, chat.ErrUnavailable) || !strings.Contains(err.Error(), "still unreachable after 1s") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) < time.Second {
		t.Fatalf("gave up after %v", time.Since(start))
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("the error holds the password: %v", err)
	}
}

func TestOpenDoesNotRetryAnAnswer(t *testing.T) {
	t.Parallel()
	// The server answers (unknown database): no point in waiting.
	u := pgtest.URL(t)
	u = u[:strings.LastIndex(u, "/")] + "/no_such_database_here?sslmode=disable"
	start := time.Now()
	_, err := Open(t.Context(), Config{URL: u, Logger: quiet, ConnectWait: time.Minute})
	if err == nil || errors.Is(err, chat.ErrUnavailable) || time.Since(start) > 30*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestTranslateUnreachable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"network", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax", &pgconn.PgError{Code: "42601"}, false},
		{"caller gave up", context.Canceled, false},
	} {
		if got := errors.Is(translate(tt.err), chat.ErrUnavailable); got != tt.want {
			t.Errorf("%s: unavailable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
