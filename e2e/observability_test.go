package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// metricsNotYetExported are metrics the dashboard shows that this version
// of the server does not export yet; they come with the metrics of the
// observability work. A name listed here that the server does export is
// reported, so the list cannot go stale unnoticed.
var metricsNotYetExported = map[string]bool{}

// TestDashboardAndAlertQueriesAgainstRealServer checks deploy/compose's
// Grafana dashboard and Prometheus alert rules against a real Prometheus
// scraping a real agentd that ran a chat: promtool accepts the rules, every
// expression evaluates, every metric it names is one the server exports
// (with samples, or defined in the code and awaiting its first event), and
// every dashboard query over metrics with samples returns a series.
func TestDashboardAndAlertQueriesAgainstRealServer(t *testing.T) {
	t.Parallel()
	prom, promtool := needTool(t, "prometheus"), needTool(t, "promtool")
	rules := filepath.Join("..", "deploy", "compose", "prometheus", "alerts.yml")
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(readExample(t, "debate.json"))
	p.waitTerminal(c.ID, 60*time.Second)

	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\n"+
		"scrape_configs: [{job_name: agentd, static_configs: [{targets: [%q]}]}]\n",
		mustAbs(t, rules), strings.TrimPrefix(p.base, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	query := func(expr string) (int, error) { return promQuery("http://"+addr, expr) }
	// rate() needs two samples in its window: wait for a few scrapes.
	waitFor(t, 60*time.Second, "three scrapes of agentd", func() bool {
		n, err := query(`count_over_time(up{job="agentd"}[1m]) >= 3`)
		return err == nil && n > 0
	})

	exprs := dashboardExprs(t)
	alerts := alertExprs(t, rules)
	source := sourceText(t)
	nameRE := regexp.MustCompile(`\b(agentd_[a-z_]+|up)\b`)
	for _, e := range append(exprs, alerts...) {
		expr := strings.ReplaceAll(e.expr, "$__rate_interval", "1m")
		n, err := query(expr)
		if err != nil {
			t.Errorf("%s: %q does not evaluate: %v", e.where, expr, err)
			continue
		}
		allSampled := true
		for _, name := range slices.Compact(nameRE.FindAllString(expr, -1)) {
			if m, err := query(fmt.Sprintf(`count({__name__=%q})`, name)); err == nil && m > 0 {
				if metricsNotYetExported[name] {
					t.Errorf("%s is exported now: drop it from metricsNotYetExported", name)
				}
				continue
			}
			allSampled = false
			base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
			switch {
			case metricsNotYetExported[name]:
				t.Logf("%s: %s is not exported by this version yet (expected)", e.where, name)
			case strings.Contains(source, `"`+base+`"`):
				// A labelled metric has no series before its first event
				// (no tool call or sandbox ran here, nothing failed).
			default:
				t.Errorf("%s: %q names %s, which agentd does not export", e.where, expr, name)
			}
		}
		if e.dashboard && allSampled && n == 0 {
			t.Errorf("%s: %q returns no series from a server that ran a chat", e.where, expr)
		}
	}
	t.Logf("checked %d dashboard and %d alert expressions", len(exprs), len(alerts))
}

type promExpr struct {
	where     string
	expr      string
	dashboard bool
}

func dashboardExprs(t *testing.T) []promExpr {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "compose", "grafana", "dashboards", "agentd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var out []promExpr
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, promExpr{where: "panel " + p.Title, expr: tg.Expr, dashboard: true})
		}
	}
	if len(out) < 10 {
		t.Fatalf("dashboard has only %d queries", len(out))
	}
	return out
}

func alertExprs(t *testing.T, path string) []promExpr {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []promExpr
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, promExpr{where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	return out
}

// promQuery runs an instant query and returns how many series it gave.
func promQuery(base, expr string) (int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s", r.Error)
	}
	return len(r.Data.Result), nil
}

// sourceText is every non-test Go file under internal/, to look metric
// names up in.
func sourceText(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(filepath.Join("..", "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		sb.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed (CI=true: a failure, not a skip)", name)
	}
	t.Skipf("%s is not installed", name)
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
