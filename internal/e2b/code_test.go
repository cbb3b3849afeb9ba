package e2b

import (
	"reflect"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

func TestResultOf(t *testing.T) {
	got := resultOf(&api.CodeResult{IsMainResult: true, Data: map[string]string{
		"text/plain": "1", "image/png": "iVBO", "application/json": `{"a":1}`, "application/x-other": "x",
	}})
	want := map[string]any{"type": "result", "is_main_result": true, "text": "1", "png": "iVBO",
		"json": map[string]any{"a": float64(1)}, "application/x-other": "x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resultOf = %v", got)
	}
}

func TestCodeLanguage(t *testing.T) {
	for in, want := range map[string]string{"": "", "python": "python", "JS": "javascript", "bash": "bash"} {
		if got, err := codeLanguage(in); err != nil || got != want {
			t.Fatalf("codeLanguage(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := codeLanguage("r"); err == nil {
		t.Fatal("codeLanguage(r): no error")
	}
}
