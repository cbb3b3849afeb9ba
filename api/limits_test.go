package api

import (
	"fmt"
	"testing"
)

// TestSpecLimits checks that the bounds openapi.yaml states are the
// constants the daemon applies (limits.go).
func TestSpecLimits(t *testing.T) {
	spec := loadSpec(t)
	param := func(path, method, name string) map[string]any {
		op := mapAt(spec, "paths", path, method)
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			pm := resolve(spec, p.(map[string]any))
			if pm["name"] == name {
				return mapAt(pm, "schema")
			}
		}
		t.Fatalf("%s %s: no parameter %q", method, path, name)
		return nil
	}
	prop := func(schema, name string) map[string]any {
		return mapAt(spec, "components", "schemas", schema, "properties", name)
	}
	for _, tc := range []struct {
		what     string
		schema   map[string]any
		min, max int64
	}{
		{"listFiles depth", param("/v1/sandboxes/{id}/files/list", "get", "depth"), 1, MaxListDepth},
		{"ExecRequest.max_output_bytes", prop("ExecRequest", "max_output_bytes"), 0, MaxOutputBytes},
	} {
		if got := fmt.Sprint(tc.schema["minimum"]); got != fmt.Sprint(tc.min) {
			t.Errorf("%s: spec minimum %s, want %d", tc.what, got, tc.min)
		}
		if got := fmt.Sprint(tc.schema["maximum"]); got != fmt.Sprint(tc.max) {
			t.Errorf("%s: spec maximum %s, want %d", tc.what, got, tc.max)
		}
	}
}
