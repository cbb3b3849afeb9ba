package api

// Limits and defaults of code contexts (POST /v1/sandboxes/{id}/code): the
// guest agent's kernels apply them, the daemon derives its transport bounds
// from them.
const (
	// DefaultCodeTimeoutSeconds is a cell's timeout_seconds when the request
	// leaves it 0.
	DefaultCodeTimeoutSeconds = 60
	// MaxCodeBytes bounds the code of one cell.
	MaxCodeBytes = 1 << 20
	// MaxCodeContexts bounds the code contexts of one sandbox, the default
	// contexts included.
	MaxCodeContexts = 16
	// MaxCodeOutputBytes is what a cell's result keeps of stdout and of
	// stderr each; the rest is streamed but not kept.
	MaxCodeOutputBytes = 1 << 20
	// MaxCodeItemBytes bounds one representation of a rich result (one
	// MIME type's content, base64 for images); a larger one is left out and
	// listed in CodeResult.Omitted with its size.
	MaxCodeItemBytes = 8 << 20
	// MaxCodeResultsBytes bounds all the rich results of one cell; results
	// past it are left out the same way.
	MaxCodeResultsBytes = 32 << 20
	// CodeInterruptGraceSeconds is how long a context has to stop after
	// SIGINT (an interrupt or a timeout) before it is restarted.
	CodeInterruptGraceSeconds = 2
)
