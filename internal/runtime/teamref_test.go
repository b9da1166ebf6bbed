package runtime

import "testing"

// TestTeamRefMergesContextVariables: a team_ref request's
// context_variables are set over the team's, key by key, so a client's
// own state keeps the team's other defaults; what is not an object is
// left for the spec's check.
func TestTeamRefMergesContextVariables(t *testing.T) {
	t.Parallel()
	team := []byte(`{"agents": [], "context_variables": {"tier": "silver", "lang": "en"}}`)
	for _, tt := range []struct {
		name, spec, req, want string
	}{
		{"over the team's", string(team), `{"tier": "gold", "seen": 1}`, `{"lang":"en","seen":1,"tier":"gold"}`},
		{"a null declares over a default", string(team), `{"lang": null}`, `{"lang":null,"tier":"silver"}`},
		{"a team without variables", `{"agents": []}`, `{"tier": "gold"}`, `{"tier": "gold"}`},
		{"not an object", string(team), `[1]`, `[1]`},
	} {
		if got := string(mergeObjects([]byte(tt.spec), []byte(tt.req))); got != tt.want {
			t.Errorf("%s: %s over %s = %s, want %s", tt.name, tt.req, tt.spec, got, tt.want)
		}
	}
}
