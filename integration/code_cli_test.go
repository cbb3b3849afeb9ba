package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCodeCLI(t *testing.T) {
	sb := newSandbox(t, nil)
	if out, errOut, code := cli(t, "x = 41\nprint('hi')\n", "code", sb.ID); code != 0 || out != "hi\n" {
		t.Fatalf("cell: %d %q %q", code, out, errOut)
	}
	if out, _, code := cli(t, "", "code", "-c", "x + 1", sb.ID); code != 0 || out != "42\n" {
		t.Fatalf("value: %d %q", code, out)
	}
	if _, errOut, code := cli(t, "1/0", "code", sb.ID); code != 1 || !strings.Contains(errOut, "ZeroDivisionError") {
		t.Fatalf("error: %d %q", code, errOut)
	}
	dir := t.TempDir()
	cell := "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
	if _, errOut, code := cli(t, cell, "code", "--save", dir, sb.ID); code != 0 || !strings.Contains(errOut, "saved") {
		t.Fatalf("save: %d %q", code, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "figure-1.png")); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatalf("figure: %v", err)
	}
	out, _, code := cli(t, "for i in range(2):\n    print(i)\n\nx * 2\n", "code", "-i", sb.ID)
	if code != 0 || out != "0\n1\n82\n" {
		t.Fatalf("repl: %d %q", code, out)
	}
	if out, _, code := cli(t, "cd /tmp\npwd\n", "code", "-i", "--lang", "bash", sb.ID); code != 0 || out != "/tmp\n" {
		t.Fatalf("bash repl: %d %q", code, out)
	}
}
