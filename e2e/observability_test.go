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

// unsampledHere are the metrics the dashboard and the alerts name that have
// no series after this test's run, and why: a labelled metric has none
// before its first event, and some events (an append fenced, a claim that
// failed) do not happen in a healthy run. Each must be defined in the code
// as a metric of its name and kind; one that has samples is reported, so
// the list cannot go stale unnoticed.
var unsampledHere = map[string]string{
	"agentd_tool_calls_total":                 "the debate calls no tool, and the counter is labelled by tool type and outcome",
	"agentd_sandbox_executions_total":         "the debate runs no code, and the counter is labelled by backend, language and outcome",
	"agentd_append_errors_total":              "no append fails in a healthy run, and the counter is labelled by reason",
	"agentd_sandbox_egress_connections_total": "the debate runs no code, so no sandbox connects through the egress proxy, and the counter is labelled by outcome",
	"agentd_sandbox_egress_refused_total":     "the debate runs no code, so the egress proxy refuses nothing, and the counter is labelled by reason",
	"agentd_sandbox_egress_bytes_total":       "the debate runs no code, so no bytes pass the egress proxy, and the counter is labelled by direction",
}

// TestDashboardAndAlertQueriesAgainstRealServer checks deploy/compose's
// Grafana dashboard and Prometheus alert rules against a real Prometheus
// scraping a real agentd that ran a chat: promtool accepts the rules, every
// expression evaluates, every metric it names (any name, found by reading
// the PromQL) is one the server exports with samples, or one listed in
// unsampledHere that the code defines as a metric, and every dashboard
// query over metrics with samples returns a series.
func TestDashboardAndAlertQueriesAgainstRealServer(t *testing.T) {
	t.Parallel()
	prom, promtool := needTool(t, "prometheus"), needTool(t, "promtool")
	rules := filepath.Join("..", "deploy", "compose", "prometheus", "alerts.yml")
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	// A permitted host gives the server its sandboxes' egress proxy, whose
	// metrics the dashboard shows; the debate runs no code, so no sandbox
	// uses it.
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX_ALLOW_HOSTS=example.com")
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
	startHelper(t, "prometheus", exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn"))
	query := func(expr string) (int, error) { return promQuery("http://"+addr, expr) }
	// rate() needs two samples in its window: wait for a few scrapes.
	waitFor(t, 60*time.Second, "three scrapes of agentd", func() bool {
		n, err := query(`count_over_time(up{job="agentd"}[1m]) >= 3`)
		return err == nil && n > 0
	})

	exprs := dashboardExprs(t)
	alerts := alertExprs(t, rules)
	source := sourceText(t)
	unsampled := map[string]bool{}
	for _, e := range append(exprs, alerts...) {
		expr := strings.ReplaceAll(e.expr, "$__rate_interval", "1m")
		n, err := query(expr)
		if err != nil {
			t.Errorf("%s: %q does not evaluate: %v", e.where, expr, err)
			continue
		}
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", e.where, expr)
		}
		allSampled := true
		for _, name := range names {
			if m, err := query(fmt.Sprintf(`count({__name__=%q})`, name)); err == nil && m > 0 {
				if metricsNotYetExported[name] {
					t.Errorf("%s is exported now: drop it from metricsNotYetExported", name)
				}
				if _, ok := unsampledHere[name]; ok {
					t.Errorf("%s has samples now: drop it from unsampledHere", name)
				}
				continue
			}
			allSampled = false
			unsampled[name] = true
			why, listed := unsampledHere[name]
			switch {
			case metricsNotYetExported[name]:
				t.Logf("%s: %s is not exported by this version yet (expected)", e.where, name)
			case !listed:
				t.Errorf("%s: %q names %s, which has no samples from a server that ran a chat (a metric without "+
					"samples here must be in unsampledHere, saying why)", e.where, expr, name)
			case !definesMetric(source, name):
				t.Errorf("%s: %q names %s, which the code does not define as a metric", e.where, expr, name)
			default:
				t.Logf("%s: %s has no samples here: %s", e.where, name, why)
			}
		}
		if e.dashboard && allSampled && n == 0 {
			t.Errorf("%s: %q returns no series from a server that ran a chat", e.where, expr)
		}
	}
	for name := range unsampledHere {
		if !unsampled[name] {
			t.Errorf("unsampledHere lists %s, which no dashboard query or alert names without samples", name)
		}
	}
	t.Logf("checked %d dashboard and %d alert expressions", len(exprs), len(alerts))
}

// promKeywords are the words of PromQL that are not metric names where
// a metric name could stand: aggregations (which may precede their
// arguments' parenthesis with a by or without clause), binary operators and
// modifiers. groupingKeywords are followed by a parenthesised list of label
// names.
var (
	promKeywords = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
		"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
		"limitk": true, "limit_ratio": true, "and": true, "or": true, "unless": true, "atan2": true, "bool": true,
		"offset": true, "start": true, "end": true, "inf": true, "nan": true}
	groupingKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// metricNames returns the metric names a PromQL expression selects, each
// once, in order: every identifier outside strings, label matchers, range
// and grouping lists that is not a function called, a keyword or a number.
func metricNames(expr string) []string {
	isStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isWord := func(c byte) bool { return isStart(c) || '0' <= c && c <= '9' }
	// skip returns the index after the bracket that closes the one at i,
	// passing over quoted strings.
	skip := func(i int, open, close byte) int {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; c {
			case '"', '\'', '`':
				for i++; i < len(expr) && expr[i] != c; i++ {
					if expr[i] == '\\' && c != '`' {
						i++
					}
				}
			case open:
				depth++
			case close:
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	var names []string
	grouping := false // the next parenthesis lists label names
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' {
					j++
				}
			}
			i = j + 1
		case c == '{':
			i = skip(i, '{', '}')
		case c == '[':
			i = skip(i, '[', ']')
		case c == '(' && grouping:
			i, grouping = skip(i, '(', ')'), false
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isWord(expr[i]) || expr[i] == '.') {
				i++ // a number, or a duration such as 5m
			}
		case isStart(c):
			j := i
			for j < len(expr) && isWord(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := strings.TrimLeft(expr[j:], " \t\n")
			switch {
			case groupingKeywords[word]:
				grouping = true
			case promKeywords[word], strings.HasPrefix(next, "("):
			case !slices.Contains(names, word):
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

// definesMetric reports whether the code defines the metric a sample name
// belongs to: a metric of that name, or for a _bucket, _sum or _count
// series, a histogram (or a summary, but for _bucket) of the base name.
func definesMetric(source, name string) bool {
	defined := func(kinds, metric string) bool {
		re := regexp.MustCompile(`(?:` + kinds + `)Opts\{\s*Name:\s*"` + regexp.QuoteMeta(metric) + `"`)
		return re.MatchString(source)
	}
	if strings.Contains(source, `prometheus.NewDesc("`+name+`"`) || defined("Counter|Gauge|Histogram|Summary", name) {
		return true
	}
	if base, ok := strings.CutSuffix(name, "_bucket"); ok {
		return defined("Histogram", base)
	}
	for _, suffix := range []string{"_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return defined("Histogram|Summary", base)
		}
	}
	return false
}

func TestMetricNamesOfPromQL(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum(up{job="agentd"})`: {"up"},
		`histogram_quantile(0.95, sum by (le, provider) (rate(agentd_model_call_duration_seconds_bucket[1m])))`: {"agentd_model_call_duration_seconds_bucket"},
		`sum by (type, outcome) (rate(agentd_tool_calls_total{outcome!="ok"}[1m]))`:                             {"agentd_tool_calls_total"},
		`max by (instance) (agentd_store_up) == 0`:                                                              {"agentd_store_up"},
		`sum(rate(agentd_http2_streams_total{path=~"a(b)}c"}[5m] offset 1h)) by (code) > bool 0.5`:              {"agentd_http2_streams_total"},
		`go_gc_gogc_percent * on(instance) group_left(version) agentd_build_info`:                               {"go_gc_gogc_percent", "agentd_build_info"},
		`increase(agentd_worker_panics_total[10m]) > 0 or absent(agentd_store_up)`:                              {"agentd_worker_panics_total", "agentd_store_up"},
		`count by (version, goversion) (agentd_build_info) unless agentd_build_info`:                            {"agentd_build_info"},
		`job:agentd_appends:rate5m / 1e3`:                                                                       {"job:agentd_appends:rate5m"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

func TestDefinesMetric(t *testing.T) {
	source := `appendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_append_errors_total",
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentd_tool_call_duration_seconds",
		var chatsDesc = prometheus.NewDesc("agentd_chats", "Chats.", nil, nil)
		channelAppends  = "agentd_appends"`
	for name, want := range map[string]bool{
		"agentd_append_errors_total":               true,
		"agentd_tool_call_duration_seconds_bucket": true,
		"agentd_tool_call_duration_seconds_count":  true,
		"agentd_chats":                      true,
		"agentd_appends":                    false, // a string of the code, not a metric
		"agentd_append_errors_total_bucket": false, // a counter has no buckets
		"agentd_append_errors":              false,
	} {
		if got := definesMetric(source, name); got != want {
			t.Errorf("definesMetric(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestDashboardLayout checks that the dashboard's panels have ids of their
// own and fit Grafana's 24 columns without covering one another.
func TestDashboardLayout(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "compose", "grafana", "dashboards", "agentd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			GridPos struct {
				H, W, X, Y int
			} `json:"gridPos"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	cells := map[cell]string{}
	for _, p := range d.Panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q have the same id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is not within 24 columns", p.Title, g)
			continue
		}
	cover:
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[cell{x, y}]; ok {
					t.Errorf("panel %q covers panel %q at column %d, row %d", p.Title, other, x, y)
					break cover
				}
				cells[cell{x, y}] = p.Title
			}
		}
	}
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
