package api

// Limits and defaults of the API that more than one component applies: the
// guest agent validates and defaults with them, the daemon derives its
// transport bounds (deadlines, answer sizes) from them, and the CLI,
// tooluse and the SDK documentation quote them. Each is written here only.
const (
	// DefaultExecTimeoutSeconds is an exec's timeout_seconds when the
	// request leaves it 0 (background processes have none by default).
	DefaultExecTimeoutSeconds = 60
	// MaxExecTimeoutSeconds bounds timeout_seconds of exec and processes.
	MaxExecTimeoutSeconds = 86400
	// DefaultMaxOutputBytes is max_output_bytes when the request leaves it
	// 0: the bytes kept per stream (stdout, stderr).
	DefaultMaxOutputBytes = 64 << 10
	// MaxOutputBytes bounds max_output_bytes.
	MaxOutputBytes = 16 << 20
	// MaxStdinBytes bounds the stdin of one request (exec body or a
	// process's stdin call).
	MaxStdinBytes = 16 << 20
	// MaxExecArgs and MaxExecEnv bound argv and env of an exec request.
	MaxExecArgs = 4096
	MaxExecEnv  = 1024
	// DefaultWaitTimeoutSeconds and MaxWaitTimeoutSeconds are the default
	// and the bound of a process wait's timeout_seconds.
	DefaultWaitTimeoutSeconds = 30
	MaxWaitTimeoutSeconds     = 3600
	// MaxListDepth bounds the depth of a file listing.
	MaxListDepth = 20
	// DefaultMaxFileBytes bounds a file upload or download unless the
	// daemon (--max-file-bytes) or the agent is configured otherwise.
	DefaultMaxFileBytes = 100 << 20
	// MaxJSONBodyBytes bounds a JSON request body other than exec's.
	MaxJSONBodyBytes = 1 << 20
	// MaxExecBodyBytes bounds an exec request body: MaxStdinBytes of stdin
	// as base64 plus the rest.
	MaxExecBodyBytes = 24 << 20
)
