// helm-render: renders a Helm chart's templates where no helm binary can be installed (Debian 12
// packages none, and npm's helm wrappers download it from GitHub at install time). It is not helm:
// it is Helm's template engine rebuilt from the same parts Helm uses, Go's text/template and
// Sprig v3 (Debian: golang-github-masterminds-sprig-dev), with Helm's own additions (include, tpl,
// required, toYaml, fromYaml, toJson, fromJson, lookup) and its render rules: every template
// under templates/ whose name does not start with "_" is rendered (NOTES.txt skipped), partials
// are shared, documents are prefixed "# Source: <chart>/templates/<file>", and "<no value>" is
// blanked unless --strict. Values: values.yaml, then each -f file, then --set a.b=c,x=y (ints,
// booleans and null parsed as Helm's strvals does for these simple forms).
//
// --lint checks what `helm lint` checks that matters here: Chart.yaml has apiVersion v2, name and
// version; every template renders with missingkey=error (a value the templates read but
// values.yaml lacks is an error, as in `helm lint --strict`); every rendered document parses as
// YAML and names apiVersion, kind and metadata.name.
//
// usage: helm-render [--lint] [--strict] [--name RELEASE] [--namespace NS] [-f values.yaml]...
//
//	[--set k=v[,k=v]]... CHART_DIR
//
// Built by scripts/deploy/install-tools.sh helm-render (GOPATH mode against Debian's Go packages).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// chartMeta holds Chart.yaml with the field names templates use (.Chart.Name, .Chart.AppVersion).
type chartMeta struct {
	APIVersion  string `json:"apiVersion"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	Description string `json:"description"`
	Type        string `json:"type"`
	KubeVersion string `json:"kubeVersion"`
}

func main() {
	lint := flag.Bool("lint", false, "check the chart instead of printing it")
	strict := flag.Bool("strict", false, "a missing value is an error (always on with --lint)")
	release := flag.String("name", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	var valueFiles, sets multiFlag
	flag.Var(&valueFiles, "f", "values file (repeatable)")
	flag.Var(&sets, "set", "k=v[,k=v] (repeatable)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-render [--lint] [--strict] [--name R] [-f values.yaml] [--set k=v] CHART_DIR")
		os.Exit(2)
	}
	out, problems, err := render(flag.Arg(0), *release, *namespace, valueFiles, sets, *strict || *lint, *lint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm-render:", err)
		os.Exit(1)
	}
	if *lint {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "[ERROR]", p)
		}
		if len(problems) > 0 {
			fmt.Fprintf(os.Stderr, "helm-render --lint: %d problem(s)\n", len(problems))
			os.Exit(1)
		}
		fmt.Println("helm-render --lint: chart metadata, strict render and every rendered document OK")
		return
	}
	fmt.Print(out)
}

func render(chartDir, release, namespace string, valueFiles, sets []string, strict, lint bool) (string, []string, error) {
	var problems []string
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", nil, err
	}
	var meta chartMeta
	if err := sigsyaml.Unmarshal(raw, &meta); err != nil {
		return "", nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if meta.APIVersion != "v2" {
		problems = append(problems, "Chart.yaml: apiVersion must be v2")
	}
	if meta.Name == "" || meta.Version == "" {
		problems = append(problems, "Chart.yaml: name and version are required")
	}
	values, err := loadValues(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return "", nil, err
	}
	for _, f := range valueFiles {
		v, err := loadValues(f)
		if err != nil {
			return "", nil, err
		}
		mergeInto(values, v)
	}
	for _, s := range sets {
		if err := applySet(values, s); err != nil {
			return "", nil, err
		}
	}

	top := map[string]interface{}{
		"Values": values,
		"Chart": map[string]interface{}{
			"Name": meta.Name, "Version": meta.Version, "AppVersion": meta.AppVersion,
			"Description": meta.Description, "Type": meta.Type, "KubeVersion": meta.KubeVersion,
			"APIVersion": meta.APIVersion,
		},
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": true,
			"IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.29.0", "Major": "1", "Minor": "29", "GitVersion": "v1.29.0"},
			"APIVersions": apiVersions{},
		},
	}

	tdir := filepath.Join(chartDir, "templates")
	entries, err := os.ReadDir(tdir)
	if err != nil {
		return "", nil, err
	}
	root := template.New("chart")
	if strict {
		root.Option("missingkey=error")
	} else {
		root.Option("missingkey=zero")
	}
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYaml
	funcs["fromYaml"] = fromYaml
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || (fmt.Sprint(v) == "" && isString(v)) {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil // as `helm template`: no cluster to look in
	}
	// include and tpl need the template set itself.
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	root.Funcs(funcs)

	var names []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		body, err := os.ReadFile(filepath.Join(tdir, e.Name()))
		if err != nil {
			return "", nil, err
		}
		name := meta.Name + "/templates/" + e.Name()
		if _, err := root.New(name).Parse(string(body)); err != nil {
			return "", nil, err
		}
		if !strings.HasPrefix(e.Name(), "_") && e.Name() != "NOTES.txt" {
			names = append(names, name)
		}
	}
	sort.Strings(names)

	var out strings.Builder
	for _, name := range names {
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": name, "BasePath": meta.Name + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			if lint {
				problems = append(problems, err.Error())
				continue
			}
			return "", nil, err
		}
		text := buf.String()
		if !strict {
			text = strings.ReplaceAll(text, "<no value>", "")
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if lint {
			problems = append(problems, checkDocuments(name, text)...)
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, strings.TrimRight(text, "\n"))
	}
	return out.String(), problems, nil
}

// checkDocuments: every YAML document of one rendered template parses and names its object.
func checkDocuments(name, text string) []string {
	var problems []string
	dec := yaml.NewDecoder(strings.NewReader(text))
	for i := 0; ; i++ {
		var doc map[string]interface{}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: document %d: %v", name, i, err))
			break
		}
		if doc == nil {
			continue
		}
		for _, k := range []string{"apiVersion", "kind"} {
			if s, ok := doc[k].(string); !ok || s == "" {
				problems = append(problems, fmt.Sprintf("%s: document %d: %s missing", name, i, k))
			}
		}
		md, _ := doc["metadata"].(map[string]interface{})
		if s, ok := md["name"].(string); !ok || s == "" {
			problems = append(problems, fmt.Sprintf("%s: document %d: metadata.name missing", name, i))
		}
	}
	return problems
}

type apiVersions struct{}

// Has answers as `helm template` without --api-versions: the built-in groups only.
func (apiVersions) Has(v string) bool {
	for _, known := range []string{"v1", "apps/v1", "autoscaling/v2", "policy/v1", "batch/v1", "networking.k8s.io/v1"} {
		if v == known || strings.HasPrefix(v, known+"/") {
			return true
		}
	}
	return false
}

func isString(v interface{}) bool { _, ok := v.(string); return ok }

func loadValues(path string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v := map[string]interface{}{}
	if err := sigsyaml.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// mergeInto: maps merge key by key, anything else replaces (Helm's coalescing for user values).
func mergeInto(dst, src map[string]interface{}) {
	for k, sv := range src {
		if sm, ok := sv.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = sv
	}
}

// applySet: --set a.b=c,d=1 for plain dotted keys (no list indexes or escaped commas).
func applySet(values map[string]interface{}, s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
		keys := strings.Split(k, ".")
		m := values
		for _, key := range keys[:len(keys)-1] {
			next, ok := m[key].(map[string]interface{})
			if !ok {
				next = map[string]interface{}{}
				m[key] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = typed(v)
	}
	return nil
}

func typed(v string) interface{} {
	switch v {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	return v
}

func toYaml(v interface{}) string {
	b, err := sigsyaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

func fromYaml(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := sigsyaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}
