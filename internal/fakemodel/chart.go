package fakemodel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// Image is an image block of a tool result (Anthropic image blocks,
// Responses input_image data URLs).
type Image struct {
	MediaType string
	Data      []byte // decoded
}

// imagesOf returns the images among the content parts of a tool result.
func imagesOf(raw json.RawMessage) []Image {
	var parts []struct {
		Type   string `json:"type"`
		Source struct {
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
		ImageURL string `json:"image_url"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []Image
	for _, p := range parts {
		mt, data := p.Source.MediaType, p.Source.Data
		if p.Type == "input_image" {
			meta, b64, ok := strings.Cut(strings.TrimPrefix(p.ImageURL, "data:"), ",")
			if !ok {
				continue
			}
			mt, data = strings.TrimSuffix(meta, ";base64"), b64
		} else if p.Type != "image" {
			continue
		}
		if b, err := base64.StdEncoding.DecodeString(data); err == nil {
			out = append(out, Image{MediaType: mt, Data: b})
		}
	}
	return out
}

// chartCode is the cell the chart conversation runs.
const chartCode = "import matplotlib.pyplot as plt\nxs = list(range(10))\nplt.plot(xs, [x * x for x in xs])\nplt.title('squares')\nsum(xs)"

// chartTurn is the chart conversation (any API, run_code offered): turn 0
// asks run_code for a chart; turn 1 expects the figure back as an image
// (a note on Chat, whose tool messages are text only) and describes it:
// "The chart is a WxH PNG; the sum is 45."
func chartTurn(st State) Turn {
	if st.Turn == 0 {
		return Turn{Calls: []Call{{Name: tooluse.RunCode, Input: map[string]string{"code": chartCode, "language": "python"}}}}
	}
	if len(st.Results) != 1 {
		return refuse("chart: want 1 tool result, got %d", len(st.Results))
	}
	r := st.Results[0]
	var out tooluse.CodeOutput
	if err := json.Unmarshal([]byte(strings.SplitN(r.Content, "\n[", 2)[0]), &out); err != nil || out.Result != "45" {
		return refuse("chart: unexpected run_code result %q", r.Content)
	}
	if st.API == Chat {
		if !strings.Contains(r.Content, "image(s) produced") {
			return refuse("chart: no image note in %q", r.Content)
		}
		return Turn{Text: "The chart was made (not visible here); the sum is 45."}
	}
	if len(r.Images) != 1 || r.Images[0].MediaType != "image/png" {
		return refuse("chart: want one PNG image block, got %d", len(r.Images))
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(r.Images[0].Data))
	if err != nil {
		return refuse("chart: image is not a PNG: %v", err)
	}
	return Turn{Text: "The chart is a " + strconv.Itoa(cfg.Width) + "x" + strconv.Itoa(cfg.Height) + " PNG; the sum is 45."}
}

// Chart is the chart conversation alone as a script (see Examples).
func Chart() Script { return chartTurn }
