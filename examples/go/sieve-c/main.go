// Command sieve-c has Claude write a C prime sieve, compile it with gcc and
// run it with the run_command tool in a Paddock sandbox. Compiler errors
// come back as tool results marked is_error, so the model fixes its code.
//
//	export PADDOCK_URL=http://127.0.0.1:7419 PADDOCK_API_KEY=pdk_...
//	export ANTHROPIC_API_KEY=sk-ant-...   # optional: ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
//	go run ./examples/go/sieve-c
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

const prompt = "Write a C program that counts the prime numbers below 10,000,000 with the sieve of " +
	"Eratosthenes. Use run_command to save it as sieve.c, compile it with `gcc -O2 -Wall -o sieve sieve.c` " +
	"and run it. Then answer with the program's output."

func main() {
	model := os.Getenv("ANTHROPIC_MODEL")
	if model == "" {
		model = anthropic.ModelClaudeSonnet5_5
	}
	session := tooluse.NewSession(client.New("", ""), tooluse.Options{Tools: []string{tooluse.RunCommand}})
	// RunStreaming prints the model's text as it arrives.
	msg, _, err := paddockanthropic.RunStreaming(context.Background(), anthropic.NewClient(), anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 8192,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}, session, paddockanthropic.Options{
		OnEvent: func(ev anthropic.MessageStreamEventUnion) {
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				fmt.Fprint(os.Stderr, ev.Delta.Text)
			}
		},
		OnToolCall: func(name string, input json.RawMessage, res tooluse.Result) {
			log.Printf("\n%s -> error=%v %s", name, res.IsError, res.Text)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(paddockanthropic.Text(msg))
}
