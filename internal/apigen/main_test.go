package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates every output from the real
// document and compares it with the committed file, checks that none is
// longer than maxGeneratedLines and that no stale generated file is left
// (the same checks as make check-generated, inside go test).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	src, err := os.ReadFile(filepath.Join(root, "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := load(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs(c) {
		want, err := o.gen(c)
		if err != nil {
			t.Fatalf("%s: %v", o.path, err)
		}
		got, err := os.ReadFile(filepath.Join(root, o.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date: run make generate", o.path)
		}
		if n := bytes.Count(want, []byte("\n")); n > maxGeneratedLines {
			t.Errorf("%s has %d lines, more than %d: give some of its schemas another x-file group", o.path, n, maxGeneratedLines)
		}
	}
	stale, err := staleFiles(root, outputs(c))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		t.Errorf("%s is no longer generated: run make generate (it removes it)", p)
	}
}

// maxGeneratedLines is the size limit of a generated file, the same as
// that of a hand-written one.
const maxGeneratedLines = 600

func TestCamel(t *testing.T) {
	for in, want := range map[string]string{
		"id": "ID", "memory_gib_seconds": "MemoryGiBSeconds", "oci_layout": "OCILayout",
		"signed_url_expires_at": "SignedURLExpiresAt", "pids": "PIDs", "duration_ms": "DurationMS",
		"stdin_base64": "StdinBase64", "network_rx_bytes": "NetworkRxBytes",
	} {
		if got := camel(in, goInitialisms); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown ref": `{info: {version: v1}, components: {schemas: {
			A: {type: object, properties: {b: {$ref: '#/components/schemas/B'}}},
			ErrorBody: {type: object, properties: {code: {type: string, x-error-codes: [{code: x, status: 400}]}}}}}}`,
		"no error table": `{info: {version: v1}, components: {schemas: {
			ErrorBody: {type: object, properties: {code: {type: string}}}}}}`,
		"inline object": `{info: {version: v1}, components: {schemas: {
			A: {type: object, properties: {b: {type: object}}}}}}`,
		"old extension": `{info: {version: v1}, components: {schemas: {
			A: {type: object, x-go-file: a, properties: {b: {type: string}}},
			ErrorBody: {type: object, properties: {code: {type: string, x-error-codes: [{code: x, status: 400}]}}}}}}`,
		"group cycle": `{info: {version: v1}, components: {schemas: {
			A: {type: object, x-file: a, properties: {b: {$ref: '#/components/schemas/B'}}},
			B: {type: object, x-file: b, properties: {c: {$ref: '#/components/schemas/C'}}},
			C: {type: object, x-file: c, properties: {a: {type: array, items: {$ref: '#/components/schemas/A'}}}},
			ErrorBody: {type: object, properties: {code: {type: string, x-error-codes: [{code: x, status: 400}]}}}}}}`,
		"enum group cycle": `{info: {version: v1}, components: {schemas: {
			A: {type: object, x-file: a, properties: {s: {type: string, enum: [x], x-enum-name: S}, b: {$ref: '#/components/schemas/B'}}},
			B: {type: object, x-file: b, properties: {s: {type: string, enum: [x], x-enum-name: S}}},
			ErrorBody: {type: object, properties: {code: {type: string, x-error-codes: [{code: x, status: 400}]}}}}}}`,
	} {
		if _, err := load([]byte(doc)); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
