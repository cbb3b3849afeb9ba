package integration

import (
	"bytes"
	"encoding/json"
	"image/png"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// TestMCPRunCode: the daemon's MCP server offers run_code; state stays
// between calls and a figure comes back as ImageContent.
func TestMCPRunCode(t *testing.T) {
	cs, err := mcpHTTP(t, shared.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	call := func(code string) *sdk.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: tooluse.RunCode, Arguments: map[string]any{"code": code, "language": "python"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	call("import matplotlib.pyplot as plt\nn = 3")
	res := call("plt.bar(range(n), [1, 3, 2])\nn * 15")
	var text string
	var img *sdk.ImageContent
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text = c.Text
		case *sdk.ImageContent:
			img = c
		}
	}
	var out tooluse.CodeOutput
	if err := json.Unmarshal([]byte(text), &out); err != nil || out.Result != "45" || res.IsError {
		t.Fatalf("text %q: %v", text, err)
	}
	if img == nil || img.MIMEType != "image/png" {
		t.Fatalf("no PNG image content: %+v", res.Content)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width != 640 {
		t.Fatalf("image: %+v %v", cfg, err)
	}
}
