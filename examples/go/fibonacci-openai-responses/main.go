// Command fibonacci-openai-responses asks an OpenAI model for the 40th
// Fibonacci number through the Responses API and lets it compute the
// answer with the run_python tool in a Paddock sandbox.
//
//	export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
//	export OPENAI_API_KEY=sk-...   # optional: OPENAI_BASE_URL, OPENAI_MODEL
//	go run ./examples/go/fibonacci-openai-responses
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
	paddockopenai "github.com/paddock-sandbox/paddock/tooluse/openai"
)

func main() {
	model := os.Getenv("OPENAI_MODEL")
	if model == "" {
		model = openai.ChatModelGPT5_5
	}
	// One sandbox for the whole conversation, deleted when RunResponses returns.
	session := tooluse.NewSession(client.New("", ""), tooluse.Options{Tools: []string{tooluse.RunPython}})
	resp, err := paddockopenai.RunResponses(context.Background(), openai.NewClient(), responses.ResponseNewParams{
		Model:        model,
		Instructions: openai.String("Compute with run_python instead of from memory."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(
			"What is the 40th Fibonacci number (F(1) = F(2) = 1)? Answer with the number.")},
	}, session, paddockopenai.Options{
		OnToolCall: func(name string, input json.RawMessage, res tooluse.Result) {
			log.Printf("%s %s -> %s", name, input, res.Text)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.OutputText())
}
