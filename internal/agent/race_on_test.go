//go:build race

package agent_test

// memSlackMiB is what TestAgentMemoryBounded allows the agent on top of
// the output cap: the race detector's shadow memory multiplies the heap
// and is not returned to the system when the heap shrinks.
const memSlackMiB = 192
