package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestEmbeddedMigrationsMatch(t *testing.T) {
	t.Parallel()
	pg, err := List(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	lite, err := List(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if len(pg) == 0 {
		t.Fatal("no postgres migrations embedded")
	}
	// Both stores must move through the same schema versions, so that
	// "version N" means the same thing whichever store a deployment uses.
	if len(pg) != len(lite) {
		t.Fatalf("postgres has %d migrations, sqlite %d", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].Name != lite[i].Name {
			t.Errorf("migration %d: postgres %s, sqlite %s", i+1, pg[i].Name, lite[i].Name)
		}
		if strings.TrimSpace(pg[i].SQL) == "" || strings.TrimSpace(lite[i].SQL) == "" {
			t.Errorf("migration %s is empty", pg[i].Name)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []int
		wantErr string
	}{
		{"ordered", fstest.MapFS{
			"0002_b.sql": {Data: []byte("b")}, "0001_a.sql": {Data: []byte("a")}, "README": {Data: []byte("x")},
		}, []int{1, 2}, ""},
		{"gap", fstest.MapFS{"0001_a.sql": {Data: []byte("a")}, "0003_c.sql": {Data: []byte("c")}}, nil, "want 2"},
		{"duplicate", fstest.MapFS{"0001_a.sql": {Data: []byte("a")}, "001_b.sql": {Data: []byte("b")}}, nil, "want 2"},
		{"bad name", fstest.MapFS{"init.sql": {Data: []byte("a")}}, nil, "NNNN_description.sql"},
		{"empty", fstest.MapFS{}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms, err := List(tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("List: err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("versions %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("versions %v, want %v", got, tt.want)
				}
			}
		})
	}
}
