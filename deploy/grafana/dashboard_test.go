// Package grafana tests counterd.json, the Grafana dashboard: its shape
// (schema, variables, panels on the ${datasource} variable, no overlapping
// panels) and, with promtool, that every expression parses as PromQL. The
// metric names it uses are checked against a running counterd and rollup
// by deploy/prometheus's TestMetricsExist.
package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type target struct {
	Expr       string         `json:"expr"`
	RefID      string         `json:"refId"`
	Datasource map[string]any `json:"datasource"`
}

type panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource map[string]any           `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []target                 `json:"targets"`
}

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func read(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("counterd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("counterd.json: %v", err)
	}
	return d
}

func TestDashboardShape(t *testing.T) {
	t.Parallel()
	d := read(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q; want both set", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d; want 36 or later (Grafana 9+)", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "instance": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q; want %q", name, vars[name], typ)
		}
	}
	ids := map[int]bool{}
	var cells [][24]bool
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for len(cells) < g.Y+g.H {
			cells = append(cells, [24]bool{})
		}
		for y := g.Y; y < g.Y+g.H; y++ {
			for x := g.X; x < min(g.X+g.W, 24); x++ {
				if cells[y][x] {
					t.Errorf("panel %q overlaps another at (%d, %d)", p.Title, x, y)
				}
				cells[y][x] = true
			}
		}
		if p.Type == "row" {
			continue
		}
		if uid := p.Datasource["uid"]; uid != "${datasource}" {
			t.Errorf("panel %q: datasource uid %v; want ${datasource}", p.Title, uid)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource["uid"] != "${datasource}" || tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: target %+v; want an expr, a refId and datasource ${datasource}", p.Title, tg)
			}
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) && !strings.Contains(tg.Expr, `instance=~"$rollup_instance"`) {
				t.Errorf("panel %q: %s does not follow the instance variable", p.Title, tg.Expr)
			}
		}
	}
}

// Every panel expression parses: promtool check rules on a rule file that
// records each of them, Grafana's variables replaced by what they expand
// to.
func TestDashboardPromQLParses(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH: install the prometheus package (make test does) to parse the dashboard's PromQL")
	}
	d := read(t)
	expand := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
		"$rollup_instance", ".*", "$rollup_job", ".*", "$instance", ".*", "$job", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			expr, err := json.Marshal(expand.Replace(tg.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			n++
			fmt.Fprintf(&rules, "      - record: dashboard:panel%d:%s\n        expr: %s\n", p.ID, tg.RefID, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "rules", file)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d expressions: %v\n%s", n, err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("SUCCESS: %d rules found", n)) {
		t.Errorf("promtool checked %q; want %d rules", out.String(), n)
	}
}
