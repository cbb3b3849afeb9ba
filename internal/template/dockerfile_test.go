package template

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

func TestParseDockerfile(t *testing.T) {
	bc := BuildContext{
		"main.py":         {Data: []byte("print(1)\n"), Mode: 0o644},
		"run.sh":          {Data: []byte("#!/bin/sh\n"), Mode: 0o755},
		"src/a.py":        {Data: []byte("a"), Mode: 0o644},
		"src/pkg/b.py":    {Data: []byte("b"), Mode: 0o600},
		"notes/readme.md": {Data: []byte("r"), Mode: 0o644},
	}
	df, err := ParseDockerfile(`# syntax=docker/dockerfile:1
ARG IMG=python:3.12
FROM ${IMG} AS build
ARG WHO=world
ARG UNSET
ENV HOME_DIR=/opt/app \
    GREETING="hello ${WHO}" LITERAL='$WHO'
ENV LEGACY some value
WORKDIR $HOME_DIR
COPY main.py ./
COPY --chmod=0700 run.sh /usr/local/bin/run
COPY src/ lib/
RUN echo ${WHO} $HOME $UNSET \$WHO > out.txt
RUN ["python3", "-c", "print('it''s')"]
USER nobody
EXPOSE 80
CMD python3 main.py
`, bc, map[string]string{"WHO": "paddock"})
	if err != nil {
		t.Fatal(err)
	}
	r := df.Recipe
	if r.From != "python:3.12" {
		t.Errorf("from %q", r.From)
	}
	if len(df.Warnings) != 1 || !strings.Contains(df.Warnings[0], "EXPOSE") {
		t.Errorf("warnings %v", df.Warnings)
	}
	want := []api.RecipeStep{
		{Env: map[string]string{"HOME_DIR": "/opt/app", "GREETING": "hello paddock", "LITERAL": "$WHO"}},
		{Env: map[string]string{"LEGACY": "some value"}},
		{Workdir: "/opt/app"},
		{Copy: &api.CopyStep{SrcBase64: []byte("print(1)\n"), Dst: "/opt/app/main.py", Mode: "0644"}},
		{Copy: &api.CopyStep{SrcBase64: []byte("#!/bin/sh\n"), Dst: "/usr/local/bin/run", Mode: "0700"}},
		{Copy: &api.CopyStep{TarBase64: nil, Dst: "/opt/app/lib"}},
		{Run: `echo paddock $HOME $UNSET \$WHO > out.txt`},
		{Run: `'python3' '-c' 'print('\''it'\''\'\'''\''s'\'')'`},
		{User: "nobody"},
		{Cmd: []string{"/bin/sh", "-c", "python3 main.py"}},
	}
	if len(r.Steps) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(r.Steps), len(want), r.Steps)
	}
	for i := range want {
		got := r.Steps[i]
		if want[i].Copy != nil && want[i].Copy.SrcBase64 == nil && got.Copy != nil {
			files := tarNames(t, got.Copy.TarBase64)
			if !reflect.DeepEqual(files, []string{"a.py 644", "pkg/b.py 600"}) {
				t.Errorf("step %d archive: %v", i+1, files)
			}
			got.Copy = &api.CopyStep{Dst: got.Copy.Dst}
		}
		if i == 7 {
			continue // the JSON form's quoting is checked by running it
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("step %d = %+v, want %+v", i+1, describe(got), describe(want[i]))
		}
	}
}

func describe(s api.RecipeStep) string {
	if s.Copy != nil {
		return Describe(s) + " mode " + s.Copy.Mode
	}
	return Describe(s)
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %o", h.Name, h.Mode))
	}
	sort.Strings(out)
	return out
}

func TestParseDockerfileErrors(t *testing.T) {
	bc := BuildContext{"a": {Data: []byte("a"), Mode: 0o644}, "b": {Data: []byte("b"), Mode: 0o644}}
	for _, c := range []struct{ name, text, want string }{
		{"no from", "RUN true\n", "before FROM"},
		{"empty", "# nothing\n", "no FROM"},
		{"multi-stage", "FROM a\nFROM b\n", "multi-stage"},
		{"copy from", "FROM base\nCOPY --from=x a /a\n", "--from"},
		{"shell", "FROM base\nSHELL [\"/bin/bash\"]\n", "SHELL is not supported"},
		{"onbuild", "FROM base\nONBUILD RUN x\n", "ONBUILD is not supported"},
		{"heredoc", "FROM base\nRUN <<EOF\necho\nEOF\n", "heredocs"},
		{"missing source", "FROM base\nCOPY nope /x\n", "not in the build context"},
		{"escape", "FROM base\nCOPY ../etc/passwd /x\n", "leaves the build context"},
		{"url", "FROM base\nADD https://example.invalid/x /x\n", "URL"},
		{"several to file", "FROM base\nCOPY a b /x\n", "ending in /"},
		{"fine", "FROM base\nRUN true\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseDockerfile(c.text, bc, nil)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrInvalid mentioning %q", err, c.want)
			}
		})
	}
}

func TestParseDockerfileCopies(t *testing.T) {
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	tw.WriteHeader(&tar.Header{Name: "x/y", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("y"))
	tw.Close()
	bc := BuildContext{
		"a.txt":      {Data: []byte("a"), Mode: 0o644},
		"b.txt":      {Data: []byte("b"), Mode: 0o644},
		"c.md":       {Data: []byte("c"), Mode: 0o644},
		"bundle.tar": {Data: tarball.Bytes(), Mode: 0o644},
	}
	df, err := ParseDockerfile("FROM base\nCOPY *.txt /dst/\nCOPY a.txt c.md /two/\nADD bundle.tar /unpacked\nCOPY . /all\n", bc, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := df.Recipe.Steps
	if len(s) != 4 {
		t.Fatalf("steps %+v", s)
	}
	if got := tarNames(t, s[0].Copy.TarBase64); !reflect.DeepEqual(got, []string{"a.txt 644", "b.txt 644"}) || s[0].Copy.Dst != "/dst" {
		t.Errorf("glob copy %v to %s", got, s[0].Copy.Dst)
	}
	if got := tarNames(t, s[1].Copy.TarBase64); !reflect.DeepEqual(got, []string{"a.txt 644", "c.md 644"}) {
		t.Errorf("two sources %v", got)
	}
	if got := tarNames(t, s[2].Copy.TarBase64); !reflect.DeepEqual(got, []string{"x/y 644"}) || s[2].Copy.Dst != "/unpacked" {
		t.Errorf("ADD archive %v to %s", got, s[2].Copy.Dst)
	}
	if got := tarNames(t, s[3].Copy.TarBase64); len(got) != 4 {
		t.Errorf("COPY . copied %v", got)
	}
}

func TestRecipeKeys(t *testing.T) {
	a := api.RecipeStep{Run: "echo a"}
	b := api.RecipeStep{Run: "echo b"}
	from := FromKey("key1", "base:base", "")
	if StepKey(from, a) != StepKey(from, a) || StepKey(from, a) == StepKey(from, b) {
		t.Error("step keys are not a function of the step")
	}
	if StepKey(from, a) == StepKey(FromKey("key2", "base:base", ""), a) {
		t.Error("two keys share a cache entry")
	}
	if StepKey(StepKey(from, a), b) == StepKey(StepKey(from, b), a) {
		t.Error("step order does not matter to the key")
	}
	for _, r := range []api.Recipe{
		{Steps: []api.RecipeStep{a}},
		{From: "base", Steps: []api.RecipeStep{{}}},
		{From: "base", Steps: []api.RecipeStep{{Run: "x", User: "y"}}},
		{From: "base", Steps: []api.RecipeStep{{Apt: []string{"--allow-unauthenticated"}}}},
		{From: "base", Steps: []api.RecipeStep{{Pip: []string{"x; rm -rf /"}}}},
		{From: "base", Steps: []api.RecipeStep{{Copy: &api.CopyStep{Content: "x"}}}},
		{From: "base", Steps: []api.RecipeStep{{Copy: &api.CopyStep{Content: "x", Dst: "/x", Mode: "999"}}}},
	} {
		if err := ValidateRecipe(&r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
	}
	ok := api.Recipe{From: "base", Steps: []api.RecipeStep{{Apt: []string{"python3-numpy", "libssl3=3.0.1-1"}},
		{Pip: []string{"pandas==2.2", "numpy>=1.26"}}, {Npm: []string{"@types/node", "left-pad@1.3.0"}}}}
	if err := ValidateRecipe(&ok); err != nil {
		t.Error(err)
	}
	if got := ShellCommand(StepApt, ok.Steps[0]); !strings.Contains(got, "apt-get install -y --no-install-recommends 'python3-numpy' 'libssl3=3.0.1-1'") {
		t.Errorf("apt command %q", got)
	}
}
