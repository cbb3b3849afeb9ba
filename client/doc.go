// Package client is the Go SDK of Paddock: it drives a paddockd over its
// REST API (/v1) to create sandboxes, run commands in them, move files in
// and out and manage background processes.
//
// The zero Client works: it talks to $PADDOCK_URL (or DefaultURL) with
// $PADDOCK_API_KEY. Every method that does I/O takes a context first.
//
//	c := &client.Client{}
//	sb, err := c.Create(ctx, &api.CreateSandboxRequest{Template: "python"})
//	if err != nil {
//		return err
//	}
//	defer sb.Close()
//	if _, err := sb.Files().Write(ctx, "main.py", []byte("print(6*7)"), 0); err != nil {
//		return err
//	}
//	res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "main.py"}})
//	// res.Stdout == "42\n", *res.ExitCode == 0
//
// A non-zero exit status and a timeout are results (api.ExecResult), not
// errors. Errors from the daemon are *APIError values that compare equal to
// the sentinels with errors.Is:
//
//	if errors.Is(err, client.ErrNotFound) { ... }
//
// Streams (Sandbox.ExecStream, Process.Output) are iter.Seq2 iterators of
// api.Event; breaking out of the loop ends the request.
//
//	for ev, err := range sb.ExecStream(ctx, api.ExecRequest{Command: "make test"}) {
//		if err != nil {
//			return err
//		}
//		switch ev.Type {
//		case api.EventStdout:
//			os.Stdout.Write(ev.Data)
//		case api.EventExit:
//			fmt.Println("timed out:", ev.TimedOut)
//		}
//	}
package client
