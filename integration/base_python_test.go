package integration

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// TestBasePythonAndAliases runs a program written for a hosted sandbox
// unchanged: template "python-3.12" (an alias of base on the shared
// daemon) and the command "python", which base provides as a link to the
// host's python3 without touching the host.
func TestBasePythonAndAliases(t *testing.T) {
	sb := newSandbox(t, &api.CreateSandboxRequest{Template: "python-3.12"})
	ctx := ctxT(t)
	for _, tc := range []struct{ cmd, want string }{
		{`python -c 'import sys; print(sys.version_info[0], sys.executable)'`, "3 "},
		{`python3 -c 'print(6*7)'`, "42"},
		{`pip --version`, "pip "},
		{`cd /tmp && echo 'print("ok")' > t.py && python t.py`, "ok"},
	} {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: tc.cmd})
		if err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		if res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("%s: exit %v stdout %q stderr %q, want exit 0 and %q", tc.cmd, res.ExitCode, res.Stdout, res.Stderr, tc.want)
		}
	}
	// The links live in the template's own root: the host is untouched
	// and the sandbox cannot change them for others.
	res, err := sb.Exec(ctx, api.ExecRequest{Command: `ls -l /.paddock/bin; touch /usr/bin/python 2>&1; echo rc=$?`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, "python -> /usr") || !strings.Contains(res.Stdout, "Read-only") {
		t.Errorf("base links: %q", res.Stdout)
	}

	c := shared.client(0)
	_, err = c.Create(ctx, &api.CreateSandboxRequest{Template: "python-3.11"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != "unknown_template" {
		t.Fatalf("unknown template: err = %v, want unknown_template", err)
	}
	for _, name := range []string{"base", "python-3.12 (= base)"} {
		if !strings.Contains(ae.Message, name) {
			t.Errorf("unknown template error %q does not list %q", ae.Message, name)
		}
	}
}
