// Command primes-anthropic asks Claude for the 1000th prime number and lets
// it compute the answer with the run_python tool in a Paddock sandbox.
//
//	export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
//	export ANTHROPIC_API_KEY=sk-ant-...   # optional: ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
//	go run ./examples/go/primes-anthropic
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/tooluse"
	paddockanthropic "github.com/paddock-sandbox/paddock/tooluse/anthropic"
)

func main() {
	model := os.Getenv("ANTHROPIC_MODEL")
	if model == "" {
		model = anthropic.ModelClaudeSonnet5_5
	}
	// One sandbox for the whole conversation, deleted when Run returns.
	session := tooluse.NewSession(client.New("", ""), tooluse.Options{Tools: []string{tooluse.RunPython}})
	msg, _, err := paddockanthropic.Run(context.Background(), anthropic.NewClient(), anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 4096,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(
			"What is the 1000th prime number? Compute it with run_python, then answer with the number."))},
	}, session, paddockanthropic.Options{
		OnToolCall: func(name string, input json.RawMessage, res tooluse.Result) {
			log.Printf("%s %s -> error=%v %s", name, input, res.IsError, res.Text)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(paddockanthropic.Text(msg))
}
