// Package deps pins the module's dependencies while their packages are being written.
package deps

import (
	_ "github.com/go-chi/chi/v5"
	_ "github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/sashabaranov/go-openai"
	_ "go.uber.org/goleak"
	_ "modernc.org/sqlite"
)
