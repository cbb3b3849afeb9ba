// Package agent is the Paddock guest agent: the HTTP service that runs as
// PID 1 inside every sandbox, and Client, the daemon's one typed client of
// it (client*.go). The agent owns the validation and the defaults of what
// it runs (the limits are shared constants of package api); the client
// only bounds the transport and maps the agent's error codes to the
// sandbox error classes.
//
// The agent serves the per-sandbox part of the REST API (api.Routes) without
// the /v1/sandboxes/{id} prefix: GET /health, POST /exec, the /processes
// routes and the /files routes (with GET /files/watch, inotify events as
// NDJSON), and the /pty routes (a WebSocket to a command on a
// pseudo-terminal of the sandbox's devpts, started by the shim as a session
// leader),
// with the wire types of package api and the same error bodies
// (api.ErrorResponse).
//
// Every command runs under a small shim (package shim): the paddock-shim
// binary next to paddock-agent (Config.ShimPath), else the agent's own
// binary with the "shim" subcommand. The shim becomes a child subreaper,
// receives the command's spec and stdio on a control socket (fd 4), starts
// the real command in its own process group and reports the command's pid
// and exit status over an extra pipe (fd 3). The agent keeps
// one shim started ahead (the spare, shimpool.go), so an exec only sends
// its spec and does not wait for a process to start; a shim whose command
// ended by itself and left no process behind comes back as the spare. With
// Config.SpareIdle (PUT /spare changes it) an unused spare is retired, and
// the next exec starts its own shim. On SIGTERM the
// shim SIGKILLs every descendant it has, including processes that called
// setsid or double-forked (they are reparented to the shim), and reports.
// That is how timeouts, cancelled requests and SIGKILL kill requests end the
// whole tree a command started.
//
// Output is captured per stream while streaming: at most max_output_bytes of
// each stream is kept and delivered, the rest is read, counted and dropped,
// and the JSON answer is escaped from the kept output as it is written, so
// the agent's memory stays within the cap plus a small constant whatever a
// program prints.
//
// As PID 1 (Config.Reaper) the agent reaps every child: one goroutine waits
// for any child on SIGCHLD and hands the statuses of the shims it started to
// their owners.
//
// With Config.IdleExec an idle agent hibernates (hibernate.go): once its
// spare retired, with nothing else running in the sandbox, no connection
// open and nothing kept for a client, it execs that program (paddock-idle,
// in C) in its own place, which holds the listening socket and execs the
// agent again, with the state it saved (Config.StateFD), at the next
// connection.
package agent
