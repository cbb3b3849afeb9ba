//go:build !race

package agent_test

// memSlackMiB is what TestAgentMemoryBounded allows the agent on top of
// the output cap.
const memSlackMiB = 12
