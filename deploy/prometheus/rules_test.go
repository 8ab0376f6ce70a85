// Package prometheus tests counterd.rules.yml: promtool accepts and unit
// tests it, every alert has a test that fires it, and every metric the rules
// and the Grafana dashboard name exists on a running counterd or rollup.
package prometheus

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	rulesFile = "counterd.rules.yml"
	testsFile = "counterd.rules.test.yml"
)

// promtool returns promtool's path, skipping the test when it is not
// installed (scripts/test.sh installs it for make test and CI).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH: install the prometheus package (make test does) to check the rules")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %v: %v; want exit 0\n%s", args, err, out.String())
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, "check", "rules", rulesFile)
}

func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, "test", "rules", testsFile)
}

// rule is one rule of a group, recording or alerting.
type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
	return rules
}

// Every alert carries a severity an Alertmanager can route on, a summary,
// and a description that points at its runbook in docs/operations.md,
// whose anchors exist.
func TestAlertsAnnotated(t *testing.T) {
	t.Parallel()
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(ops), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("%s: severity %q; want critical, warning or info", r.Alert, s)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s has no summary", r.Alert)
		}
		refs := regexp.MustCompile(`docs/operations\.md#([a-z0-9-]+)`).FindAllStringSubmatch(r.Annotations["description"], -1)
		if len(refs) == 0 {
			t.Errorf("%s: description names no runbook (docs/operations.md#section):\n%s", r.Alert, r.Annotations["description"])
		}
		for _, ref := range refs {
			if !anchors[ref[1]] {
				t.Errorf("%s: runbook docs/operations.md#%s is not a heading of docs/operations.md", r.Alert, ref[1])
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a heading.
func githubAnchor(heading string) string {
	var b []rune
	for _, r := range heading {
		switch {
		case r >= 'A' && r <= 'Z':
			b = append(b, r-'A'+'a')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b = append(b, r)
		case r == ' ':
			b = append(b, '-')
		}
	}
	return string(b)
}

// Every alert is fired by counterd.rules.test.yml (an alert_rule_test with
// an expected alert) and checked quiet: by an eval that expects none, or by
// firing in a test that also holds healthy series (instance="healthy"),
// which promtool then checks stay out of the alerts.
func TestEveryAlertTested(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name        string `yaml:"name"`
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", testsFile, err)
	}
	if !slices.Equal(f.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s tests %v; want [%s]", testsFile, f.RuleFiles, rulesFile)
	}
	fired, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		healthy := slices.ContainsFunc(tc.InputSeries, func(s struct {
			Series string `yaml:"series"`
		}) bool {
			return strings.Contains(s.Series, `instance="healthy"`)
		})
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
				quiet[a.Alertname] = quiet[a.Alertname] || healthy
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		if !fired[r.Alert] {
			t.Errorf("%s is never fired by %s", r.Alert, testsFile)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s is never checked quiet by %s", r.Alert, testsFile)
		}
	}
}
