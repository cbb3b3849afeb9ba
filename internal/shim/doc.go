// Package shim is the command shim of the guest agent: the small process
// every command of a sandbox starts under. The agent starts a shim (the
// paddock-shim binary, or its own binary with the "shim" subcommand when
// paddock-shim is missing) with a status pipe on fd 3 and one end of a
// unix socket pair on fd 4. The shim makes itself undumpable and a child
// subreaper, receives the command's spec and stdio on fd 4 (SendSpec),
// starts the command in its own process group or session, and reports
// the command's pid and then its exit status or signal as JSON lines
// (Status) on fd 3. On SIGTERM, SIGINT or SIGHUP it SIGKILLs every
// descendant before reporting. A shim whose command ended by itself and
// left no process behind says so (Status.Reuse) and waits for another spec;
// any other exits.
//
// The package imports nothing beyond the standard library's basics and
// x/sys/unix, so that paddock-shim is a small binary that starts in a
// third of the time the agent's binary takes: the agent keeps one shim
// started ahead, and every exec that takes it starts the next one.
package shim
