package config

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// repoRoot is the repository's root folder, from this package's.
const repoRoot = "../.."

// compileSchema compiles JSONSchema with a real validator.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSONSchema()))
	if err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(JSONSchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(JSONSchemaID)
	if err != nil {
		t.Fatalf("compile the schema: %v", err)
	}
	return s
}

// yamlInstance reads a YAML file as the JSON value a YAML language server
// validates.
func yamlInstance(t *testing.T, name string) any {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return inst
}

// TestJSONSchemaAcceptsEveryConfig validates every committed config that
// the generator accepts (examples, test queues, golden inputs, and the
// golden error cases whose errors only Load can find) against the schema.
func TestJSONSchemaAcceptsEveryConfig(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	var files []string
	for _, pattern := range []string{"*/skipjack.yaml", "*/*/skipjack.yaml", "*/*/*/skipjack.yaml", "golden/*/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	files = slices.Compact(slices.Sorted(slices.Values(files)))
	if len(files) < 20 {
		t.Fatalf("found only %d configs: %v", len(files), files)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(repoRoot, f)
		base := filepath.Base(f)
		if _, rejected := rejectedErrorCases[strings.TrimSuffix(base, ".yaml")]; rejected && strings.HasPrefix(rel, "golden/errors/") {
			continue
		}
		if rel == "golden/errors/bad_yaml_syntax.yaml" || rel == "golden/errors/duplicate_key.yaml" {
			continue // not a YAML document a validator can read
		}
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			if err := s.Validate(yamlInstance(t, f)); err != nil {
				t.Errorf("the schema rejects %s:\n%v", rel, err)
			}
		})
	}
}

// rejectedErrorCases are the golden error cases the schema itself must
// reject, with a word its error must contain.
var rejectedErrorCases = map[string]string{
	"bad_queue_name": "SendEmail",
	"reserved_name":  "select",
	"schedule_entry": "missed",
	"unknown_key":    "max_atempts",
	"unique_key":     "max_payload_bytes",
}

// TestJSONSchemaRejectsBadConfigs validates the golden error cases whose
// mistakes are in the config's shape and checks that the schema rejects
// each, pointing at the mistake.
func TestJSONSchemaRejectsBadConfigs(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	for name, word := range rejectedErrorCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(yamlInstance(t, filepath.Join(repoRoot, "golden", "errors", name+".yaml")))
			if err == nil {
				t.Fatalf("the schema accepts golden/errors/%s.yaml", name)
			}
			if !strings.Contains(err.Error(), word) {
				t.Errorf("the schema's error does not mention %q:\n%v", word, err)
			}
		})
	}
}

// TestJSONSchemaKeys checks that the schema declares exactly the keys Load
// reads, at the top, in a queue and in each section.
func TestJSONSchemaKeys(t *testing.T) {
	t.Parallel()
	var schema struct {
		Properties map[string]json.RawMessage
	}
	if err := json.Unmarshal(JSONSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	keys := func(raw json.RawMessage, path ...string) []string {
		t.Helper()
		var node map[string]json.RawMessage
		for _, p := range path {
			if err := json.Unmarshal(raw, &node); err != nil {
				t.Fatalf("%v: %v", path, err)
			}
			raw = node[p]
		}
		var props map[string]json.RawMessage
		if err := json.Unmarshal(raw, &props); err != nil {
			t.Fatalf("%v: %v", path, err)
		}
		return slices.Sorted(maps.Keys(props))
	}
	top, _ := json.Marshal(schema.Properties)
	queue := []string{"queues", "additionalProperties"}
	tests := []struct {
		name string
		path []string
		want []string
	}{
		{"top", nil, topKeys},
		{"migrations", []string{"migrations", "properties"}, migrationsKeys},
		{"queue", append(queue, "properties"), queueKeys},
		{"backoff", append(queue, "properties", "backoff", "properties"), backoffKeys},
		{"retention", append(queue, "properties", "retention", "properties"), retentionKeys},
		{"unique", append(queue, "properties", "unique", "properties"), uniqueKeys},
		{"limits", append(queue, "properties", "limits", "properties"), limitsKeys},
		{"rate", append(queue, "properties", "limits", "properties", "rate", "properties"), rateKeys},
		{"serial", append(queue, "properties", "serial", "properties"), serialKeys},
		{"schedule", append(queue, "properties", "schedule", "items", "properties"), scheduleKeys},
		{"table", append(queue, "properties", "table", "properties"), storageParamNames},
		{"workflow", []string{"workflows", "additionalProperties", "properties"}, workflowKeys},
		{"step", []string{"workflows", "additionalProperties", "properties", "steps", "additionalProperties", "properties"}, stepKeys},
	}
	for _, tt := range tests {
		got := keys(top, tt.path...)
		if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
			t.Errorf("%s keys in the schema: %v, want %v", tt.name, got, want)
		}
	}
}

// TestJSONSchemaCommitted checks that docs/skipjack.schema.json, which the
// docs' yaml-language-server comment points at, is the schema skipjack
// schema prints.
func TestJSONSchemaCommitted(t *testing.T) {
	t.Parallel()
	name := filepath.Join(repoRoot, "docs", "skipjack.schema.json")
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, JSONSchema()) {
		t.Errorf("docs/skipjack.schema.json is out of date; run: go run ./cmd/skipjack schema > docs/skipjack.schema.json")
	}
}
