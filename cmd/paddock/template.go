package main

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

const templateDetail = `Subcommands:

  build [-f Dockerfile] -t NAME[:TAG] [--build-arg K=V]... [--no-cache] [CONTEXT]
        Build a template from a Dockerfile (FROM, RUN, COPY, ADD, ENV, ARG,
        WORKDIR, USER, CMD). CONTEXT (default .) is sent as a tar archive,
        without what .dockerignore lists; COPY and ADD read from it. Each
        step runs in a sandbox and is cached: an unchanged Dockerfile
        rebuilds at once. Sandboxes have no network, so apt, pip and npm
        need a package mirror reachable from inside them.
  ls [--json]          List the templates this key can use
  get [--json] NAME    Show one template
  rm NAME...           Delete templates (not while a sandbox uses one)
  snapshot ID NAME     Save a sandbox's files as a new template

  paddock template build -t myapp:v1 .
  paddock create --template myapp:v1`

// cmdTemplate implements "paddock template SUBCOMMAND".
func (c *cli) cmdTemplate(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fs := c.flagSet("template")
		c.printCommandHelp(c.stdout, fs)
		if len(args) == 0 {
			return usagef("template", "no subcommand given")
		}
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "build":
		return c.templateBuild(ctx, rest)
	case "ls", "list":
		return c.templateLs(ctx, rest)
	case "get", "info":
		return c.templateGet(ctx, rest)
	case "rm", "delete":
		return c.templateRm(ctx, rest)
	case "snapshot":
		return c.templateSnapshot(ctx, rest)
	}
	return usagef("template", "unknown subcommand %q", sub)
}

func (c *cli) templateBuild(ctx context.Context, args []string) error {
	fs := c.flagSet("template")
	file := fs.String("f", "", "the `Dockerfile` (default CONTEXT/Dockerfile)")
	tag := fs.String("t", "", "the template's `NAME[:TAG]` (required)")
	var buildArgs kvList
	fs.Var(&buildArgs, "build-arg", "a Dockerfile ARG value `K=V` (repeatable)")
	noCache := fs.Bool("no-cache", false, "rebuild every step")
	quiet := fs.Bool("quiet", false, "print only the template's name")
	asJSON := fs.Bool("json", false, "print the build events as JSON lines")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if *tag == "" {
		return usagef("template", "build needs -t NAME[:TAG]")
	}
	if len(pos) > 1 {
		return usagef("template", "build takes one CONTEXT directory")
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("build context %s is not a directory", dir)
	}
	ba, err := buildArgs.toMap(c.lookupEnv)
	if err != nil {
		return usagef("template", "--build-arg %v", err)
	}
	dfName, extra, err := dockerfileIn(dir, *file)
	if err != nil {
		return err
	}
	ignore := readDockerignore(dir)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContextTar(pw, dir, ignore, extra)) }()
	defer pr.Close()
	opts := client.BuildOptions{Name: *tag, Dockerfile: dfName, BuildArgs: ba, NoCache: *noCache}
	start := time.Now()
	var tpl *api.Template
	for ev, err := range c.client().BuildContext(ctx, opts, pr) {
		if err != nil {
			return fmt.Errorf("build %s: %w", *tag, err)
		}
		if *asJSON {
			writeJSON(c.stdout, ev)
		} else if !*quiet {
			c.printBuildEvent(ev)
		}
		if ev.Type == api.BuildEventDone {
			tpl = ev.Template
		}
	}
	if tpl == nil {
		return fmt.Errorf("build %s: the daemon sent no result", *tag)
	}
	if !*quiet && !*asJSON {
		fmt.Fprintf(c.stderr, "built %s: %d layers, %s, in %s\n", tpl.Name, tpl.Layers, humanBytes(tpl.Size),
			shortDuration(time.Since(start)))
	}
	if !*asJSON {
		fmt.Fprintln(c.stdout, tpl.Name)
	}
	return nil
}

// printBuildEvent shows build progress on stderr.
func (c *cli) printBuildEvent(ev api.BuildEvent) {
	switch ev.Type {
	case api.BuildEventStep:
		fmt.Fprintf(c.stderr, "[%d/%d] %s\n", ev.Step, ev.Steps, ev.Instruction)
	case api.BuildEventCached:
		fmt.Fprintf(c.stderr, "      cached\n")
	case api.BuildEventOutput:
		for _, line := range strings.SplitAfter(ev.Output, "\n") {
			if line != "" {
				fmt.Fprintf(c.stderr, "      | %s", strings.TrimSuffix(line, "\n")+"\n")
			}
		}
	}
}

// dockerfileIn returns the Dockerfile's path in the context dir; a
// Dockerfile outside it is added to the archive under a reserved name.
func dockerfileIn(dir, file string) (name string, extra map[string][]byte, err error) {
	if file == "" {
		return "Dockerfile", nil, nil
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	absFile, err := filepath.Abs(file)
	if err != nil {
		return "", nil, err
	}
	if rel, err := filepath.Rel(absDir, absFile); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel), nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	const reserved = ".paddock.Dockerfile"
	return reserved, map[string][]byte{reserved: data}, nil
}

// readDockerignore reads CONTEXT/.dockerignore: one pattern per line
// (path.Match syntax, matched against a path or any of its parents;
// comments and "!" exceptions are skipped).
func readDockerignore(dir string) []string {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "!") {
			continue
		}
		out = append(out, strings.TrimSuffix(path.Clean("/" + l)[1:], "/"))
	}
	return out
}

func ignored(rel string, patterns []string) bool {
	for _, p := range patterns {
		for q := rel; q != "." && q != "/" && q != ""; q = path.Dir(q) {
			if m, _ := path.Match(p, q); m {
				return true
			}
		}
	}
	return false
}

// writeContextTar writes the regular files of dir (and extra) as a tar.
func writeContextTar(w io.Writer, dir string, ignore []string, extra map[string][]byte) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignored(rel, ignore) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm()),
			Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
			return err
		}
		_, err = io.CopyN(tw, f, fi.Size())
		return err
	})
	if err != nil {
		return err
	}
	for name, data := range extra {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		tw.Write(data)
	}
	return tw.Close()
}

func (c *cli) templateLs(ctx context.Context, args []string) error {
	fs := c.flagSet("template")
	asJSON := fs.Bool("json", false, "print the templates as a JSON array")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("template", "ls: unexpected argument %q", pos[0])
	}
	list, err := c.client().Templates(ctx)
	if err != nil {
		return fmt.Errorf("list templates: %w", err)
	}
	if *asJSON {
		if list == nil {
			list = []api.Template{}
		}
		return writeJSON(c.stdout, list)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tSIZE\tLAYERS\tCREATED\tSCOPE\tSTATUS")
	now := c.now()
	for _, t := range list {
		scope := "own"
		if t.Shared {
			scope = "shared"
		}
		created := "-"
		if !t.CreatedAt.IsZero() {
			created = relTime(t.CreatedAt, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.Name, t.Source, humanBytes(t.Size), t.Layers, created, scope, t.Status)
	}
	return tw.Flush()
}

func (c *cli) templateGet(ctx context.Context, args []string) error {
	fs := c.flagSet("template")
	asJSON := fs.Bool("json", false, "print the template as JSON")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("template", "get takes one NAME")
	}
	t, err := c.client().Template(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("template %s: %w", pos[0], err)
	}
	if *asJSON {
		return writeJSON(c.stdout, t)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\nsource\t%s\nstatus\t%s\n", t.Name, t.Source, t.Status)
	if t.Digest != "" {
		fmt.Fprintf(tw, "digest\t%s\n", t.Digest)
	}
	fmt.Fprintf(tw, "size\t%s\nlayers\t%d\n", humanBytes(t.Size), t.Layers)
	if t.Owner != "" {
		fmt.Fprintf(tw, "owner\t%s\n", t.Owner)
	}
	fmt.Fprintf(tw, "shared\t%v\non base\t%v\nruntime\t%s\n", t.Shared, t.OnBase, orDash(t.Runtime))
	if len(t.Env) > 0 {
		fmt.Fprintf(tw, "env\t%s\n", strings.Join(t.Env, " "))
	}
	if t.Workdir != "" {
		fmt.Fprintf(tw, "workdir\t%s\n", t.Workdir)
	}
	return tw.Flush()
}

func (c *cli) templateRm(ctx context.Context, args []string) error {
	fs := c.flagSet("template")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("template", "rm needs a NAME")
	}
	failed := 0
	for _, name := range pos {
		if err := c.client().DeleteTemplate(ctx, name); err != nil {
			fmt.Fprintf(c.stderr, "paddock: rm %s: %s\n", name, oneLine(err.Error()))
			failed++
			continue
		}
		fmt.Fprintln(c.stdout, name)
	}
	if failed > 0 {
		return &exitError{code: 1}
	}
	return nil
}

func (c *cli) templateSnapshot(ctx context.Context, args []string) error {
	fs := c.flagSet("template")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("template", "snapshot takes a sandbox ID and a NAME")
	}
	t, err := c.client().Sandbox(pos[0]).Snapshot(ctx, pos[1])
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", pos[0], err)
	}
	fmt.Fprintln(c.stdout, t.Name)
	return nil
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
