// Package migrations holds agentd's SQL migrations, embedded in the binary:
// one numbered file per version (0001_init.sql, 0002_….sql), in postgres/
// and in sqlite/ with the same versions. The stores in internal/store apply
// them (agentd migrate, and by default at start); this package only lists them.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Postgres holds the Postgres migrations at its root (0001_init.sql, …).
var Postgres fs.FS = mustSub("postgres")

// SQLite holds the SQLite migrations at its root (0001_init.sql, …).
var SQLite fs.FS = mustSub("sqlite")

// mustSub cannot fail for a directory named in the embed pattern; a panic here
// means the pattern and the names above disagree, which no test run misses.
func mustSub(dir string) fs.FS {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		panic(fmt.Sprintf("migrations: %v", err))
	}
	return sub
}

// Migration is one numbered SQL file.
type Migration struct {
	// Version is the file's number, 1 for 0001_init.sql.
	Version int
	// Name is the file name, e.g. "0001_init.sql".
	Name string
	// SQL is the file's content; it may hold several statements.
	SQL string
}

// List returns the migrations at the root of fsys in version order. Versions
// must be dense from 1, so that a missing or duplicated file is an error at
// start rather than a silently skipped schema change.
func List(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions must be 1, 2, 3 … without gaps or duplicates)", m.Name, m.Version, i+1)
		}
	}
	return ms, nil
}
