package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/paddock-sandbox/paddock/internal/store"
)

func keys(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: paddockd keys create --name NAME | paddockd keys list")
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	stateDir := fs.String("state-dir", defaultStateDir, "daemon state directory")
	name := fs.String("name", "", "name of the new key (create)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		os.Exit(2)
	}
	if err := os.MkdirAll(*stateDir, 0o711); err != nil {
		return err
	}
	k, err := store.OpenKeys(*stateDir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if *name == "" {
			return errors.New("keys create: --name is required")
		}
		secret, rec, err := k.Create(*name)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "created key %s (%s); it is shown only once\n", rec.ID, rec.Name)
		fmt.Println(secret)
	case "list":
		recs, err := k.List()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.ID, r.Name, r.CreatedAt.Format("2006-01-02 15:04:05"))
		}
		tw.Flush()
	default:
		return fmt.Errorf("keys: unknown subcommand %q", args[0])
	}
	return nil
}
