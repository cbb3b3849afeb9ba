package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// runCell runs code and fails t on a request error.
func runCell(t *testing.T, sb *client.Sandbox, req api.CodeRequest) *api.CodeExecution {
	t.Helper()
	res, err := sb.RunCode(ctxT(t), &req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Code, err)
	}
	return res
}

// mainResult is the text/plain of the cell's value ("" if none).
func mainResult(res *api.CodeExecution) string {
	for _, r := range res.Results {
		if r.IsMainResult {
			return r.Data["text/plain"]
		}
	}
	return ""
}

func TestCodePython(t *testing.T) {
	sb := newSandbox(t, nil)
	t.Run("state persists", func(t *testing.T) {
		runCell(t, sb, api.CodeRequest{Code: "x = 41"})
		res := runCell(t, sb, api.CodeRequest{Code: "print('hello')\nx + 1"})
		if mainResult(res) != "42" || res.Stdout != "hello\n" || res.Error != nil || res.ExecutionCount != 2 {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("import and dataframe survive", func(t *testing.T) {
		res := runCell(t, sb, api.CodeRequest{Code: "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})"})
		if res.Error != nil {
			t.Fatalf("pandas: %+v", res.Error)
		}
		res = runCell(t, sb, api.CodeRequest{Code: "df"})
		if len(res.Results) != 1 || !strings.Contains(res.Results[0].Data["text/html"], "<table") {
			t.Fatalf("dataframe: %+v", res.Results)
		}
		var split struct {
			Columns []string `json:"columns"`
			Data    [][]any  `json:"data"`
		}
		if err := json.Unmarshal([]byte(res.Results[0].Data["application/json"]), &split); err != nil || len(split.Data) != 3 || split.Columns[1] != "b" {
			t.Fatalf("dataframe json %q: %v", res.Results[0].Data["application/json"], err)
		}
		if got := mainResult(runCell(t, sb, api.CodeRequest{Code: "int(pd.Series([1, 2]).sum() + df.a.sum())"})); got != "9" {
			t.Fatalf("sum %q", got)
		}
	})
	t.Run("matplotlib figure is a PNG", func(t *testing.T) {
		res := runCell(t, sb, api.CodeRequest{Code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title('t')"})
		var pngB64 string
		for _, r := range res.Results {
			if v, ok := r.Data["image/png"]; ok {
				pngB64 = v
				if !strings.HasPrefix(r.Data["image/svg+xml"], "<?xml") {
					t.Errorf("no SVG next to the PNG")
				}
			}
		}
		raw, err := base64.StdEncoding.DecodeString(pngB64)
		if err != nil || len(raw) == 0 {
			t.Fatalf("no PNG: %v %+v %+v", err, res, res.Error)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		b := img.Bounds()
		if b.Dx() != 640 || b.Dy() != 480 {
			t.Fatalf("size %v", b)
		}
		colors := map[uint32]bool{}
		for y := b.Min.Y; y < b.Max.Y; y += 7 {
			for x := b.Min.X; x < b.Max.X; x += 7 {
				r, g, bl, _ := img.At(x, y).RGBA()
				colors[r>>8<<16|g>>8<<8|bl>>8] = true
			}
		}
		if len(colors) < 3 {
			t.Fatalf("blank image: %d colors", len(colors))
		}
		// Figures are closed after the cell: the next one has none.
		if res := runCell(t, sb, api.CodeRequest{Code: "len(plt.get_fignums())"}); mainResult(res) != "0" {
			t.Fatalf("figures left: %+v", res)
		}
	})
	t.Run("exception then the context still works", func(t *testing.T) {
		res := runCell(t, sb, api.CodeRequest{Code: "def f():\n    return 1 / 0\nf()"})
		if res.Error == nil || res.Error.Name != "ZeroDivisionError" || res.Error.Value != "division by zero" ||
			!strings.Contains(res.Error.Traceback, "return 1 / 0") {
			t.Fatalf("error %+v", res.Error)
		}
		if got := mainResult(runCell(t, sb, api.CodeRequest{Code: "x"})); got != "41" {
			t.Fatalf("after error: %q", got)
		}
	})
	t.Run("timeout interrupts and keeps state", func(t *testing.T) {
		res := runCell(t, sb, api.CodeRequest{Code: "while True:\n    pass", TimeoutSeconds: 1})
		if !res.TimedOut || !res.Interrupted || res.Restarted || res.Error == nil || res.Error.Name != "TimeoutError" {
			t.Fatalf("timeout %+v", res)
		}
		if got := mainResult(runCell(t, sb, api.CodeRequest{Code: "x"})); got != "41" {
			t.Fatalf("after timeout: %q", got)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		var types []string
		out := map[string]string{}
		for ev, err := range sb.RunCodeStream(ctxT(t), &api.CodeRequest{Code: "import sys\nprint('a', flush=True)\nprint('b', file=sys.stderr)\n7 * 6"}) {
			if err != nil {
				t.Fatal(err)
			}
			types = append(types, ev.Type)
			out[ev.Type] += ev.Text
			if ev.Type == api.CodeEventEnd && (ev.Execution == nil || ev.Execution.ExecutionCount == 0) {
				t.Fatalf("end %+v", ev)
			}
		}
		if types[len(types)-1] != api.CodeEventEnd || !strings.Contains(strings.Join(types, ","), "result") || out["stdout"] != "a\n" || out["stderr"] != "b\n" {
			t.Fatalf("events %v output %q", types, out)
		}
	})
}

func TestCodeContexts(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	a, err := sb.CreateCodeContext(ctx, &api.CodeContextRequest{Language: "python"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sb.CreateCodeContext(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("isolated", func(t *testing.T) {
		runCell(t, sb, api.CodeRequest{ContextID: a.ID, Code: "v = 'a'"})
		res := runCell(t, sb, api.CodeRequest{ContextID: b.ID, Code: "v"})
		if res.Error == nil || res.Error.Name != "NameError" {
			t.Fatalf("b sees a's global: %+v", res)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		done := make(chan *api.CodeExecution, 1)
		go func() {
			res, _ := sb.RunCode(ctx, &api.CodeRequest{ContextID: a.ID, Code: "import time\ntime.sleep(60)"})
			done <- res
		}()
		for c, _ := sb.CodeContext(ctx, a.ID); c == nil || !c.Busy; c, _ = sb.CodeContext(ctx, a.ID) {
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := sb.InterruptCodeContext(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res == nil || !res.Interrupted || res.Restarted || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
			t.Fatalf("interrupted: %+v", res)
		}
		if got := mainResult(runCell(t, sb, api.CodeRequest{ContextID: a.ID, Code: "v"})); got != "'a'" {
			t.Fatalf("after interrupt: %q", got)
		}
	})
	t.Run("restart clears state", func(t *testing.T) {
		c, err := sb.RestartCodeContext(ctx, a.ID)
		if err != nil || c.ExecutionCount != 0 {
			t.Fatalf("restart: %+v %v", c, err)
		}
		res := runCell(t, sb, api.CodeRequest{ContextID: a.ID, Code: "v"})
		if res.Error == nil || res.Error.Name != "NameError" || res.ExecutionCount != 1 {
			t.Fatalf("after restart: %+v", res)
		}
	})
	t.Run("language mismatch and delete", func(t *testing.T) {
		_, err := sb.RunCode(ctx, &api.CodeRequest{ContextID: a.ID, Language: "bash", Code: "ls"})
		if !errors.Is(err, client.ErrBadRequest) {
			t.Fatalf("mismatch: %v", err)
		}
		if err := sb.DeleteCodeContext(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.RunCode(ctx, &api.CodeRequest{ContextID: b.ID, Code: "1"}); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("deleted: %v", err)
		}
	})
}

func TestCodeJavaScriptAndBash(t *testing.T) {
	sb := newSandbox(t, nil)
	t.Run("javascript top-level await", func(t *testing.T) {
		runCell(t, sb, api.CodeRequest{Language: "javascript", Code: "const v = await new Promise(r => setTimeout(() => r(41), 10))"})
		res := runCell(t, sb, api.CodeRequest{Language: "javascript", Code: "console.log('js'); v + 1"})
		if mainResult(res) != "42" || res.Stdout != "js\n" {
			t.Fatalf("js %+v", res)
		}
		res = runCell(t, sb, api.CodeRequest{Language: "js", Code: "null.x"})
		if res.Error == nil || res.Error.Name != "TypeError" {
			t.Fatalf("js error %+v", res.Error)
		}
	})
	t.Run("bash keeps cd and variables", func(t *testing.T) {
		runCell(t, sb, api.CodeRequest{Language: "bash", Code: "mkdir -p /tmp/d && cd /tmp/d\nN=7"})
		res := runCell(t, sb, api.CodeRequest{Language: "bash", Code: "echo $N; pwd"})
		if res.Stdout != "7\n/tmp/d\n" || res.Error != nil {
			t.Fatalf("bash %+v", res)
		}
		res = runCell(t, sb, api.CodeRequest{Language: "bash", Code: "false"})
		if res.Error == nil || res.Error.Name != "ExitStatus" {
			t.Fatalf("bash status %+v", res)
		}
	})
}

func TestCodeLimits(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	t.Run("huge output is truncated", func(t *testing.T) {
		res := runCell(t, sb, api.CodeRequest{Code: "print('x' * (5 << 20))"})
		if !res.StdoutTruncated || len(res.Stdout) != api.MaxCodeOutputBytes {
			t.Fatalf("stdout %d truncated %v", len(res.Stdout), res.StdoutTruncated)
		}
	})
	t.Run("a 50 MB image is reported, not dropped", func(t *testing.T) {
		res := runCell(t, sb, api.CodeRequest{Code: "class Big:\n    def _repr_png_(self):\n        return b'\\x89PNG' + bytes(50_000_000)\nBig()"})
		if len(res.Results) != 1 || res.Results[0].Omitted["image/png"] < 50_000_000 || res.Results[0].Data["image/png"] != "" {
			t.Fatalf("big image: %+v", res.Results)
		}
		if !strings.Contains(res.Results[0].Data["text/plain"], "omitted") {
			t.Fatalf("no note: %q", res.Results[0].Data["text/plain"])
		}
	})
	t.Run("context count", func(t *testing.T) {
		var err error
		for i := 0; i <= api.MaxCodeContexts && err == nil; i++ {
			_, err = sb.CreateCodeContext(ctx, &api.CodeContextRequest{Language: "bash"})
		}
		if !errors.Is(err, client.ErrLimitExceeded) {
			t.Fatalf("17th context: %v", err)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		for _, req := range []api.CodeRequest{
			{Code: "1", Language: "cobol"},
			{Code: "1", TimeoutSeconds: -1},
			{Code: "1", Env: map[string]string{"A=B": "x"}},
		} {
			if _, err := sb.RunCode(ctx, &req); !errors.Is(err, client.ErrBadRequest) {
				t.Errorf("%+v: %v", req, err)
			}
		}
		if _, err := sb.RunCode(ctx, &api.CodeRequest{Code: strings.Repeat("#", api.MaxCodeBytes+1)}); !errors.Is(err, client.ErrTooLarge) {
			t.Errorf("big code: %v", err)
		}
	})
}
