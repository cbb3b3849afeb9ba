package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// cpArg is one side of "paddock cp": a sandbox path when id is set, else a
// local path, "-" meaning stdin or stdout.
type cpArg struct {
	id   string
	path string
}

// parseCpArg splits "ID:PATH". A colon after a slash ("./a:b") or after a
// drive letter on Windows ("C:\x") belongs to a local path. An empty
// sandbox path means /workspace/.
func parseCpArg(s, goos string) cpArg {
	i := strings.IndexByte(s, ':')
	if i <= 0 || strings.ContainsAny(s[:i], `/\`) {
		return cpArg{path: s}
	}
	if goos == "windows" && i == 1 {
		return cpArg{path: s}
	}
	p := s[i+1:]
	if p == "" {
		p = "/workspace/"
	}
	return cpArg{id: s[:i], path: p}
}

// intoDir joins name to dir when dir names a directory by a trailing
// slash (or when isDir says so), and returns dir unchanged otherwise.
func intoDir(dir, name string, isDir bool) string {
	if strings.HasSuffix(dir, "/") || isDir {
		return path.Join(dir, name)
	}
	return dir
}

// parseMode parses an octal permission string such as "0644"; ok is false
// when it is not one.
func parseMode(s string) (os.FileMode, bool) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || s == "" {
		return 0, false
	}
	return os.FileMode(n).Perm(), true
}

// cmdCp implements "paddock cp SRC DST".
func (c *cli) cmdCp(ctx context.Context, args []string) error {
	fs := c.flagSet("cp")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("cp", "want SRC and DST, got %d arguments", len(pos))
	}
	src, dst := parseCpArg(pos[0], runtime.GOOS), parseCpArg(pos[1], runtime.GOOS)
	switch {
	case src.id != "" && dst.id != "":
		return usagef("cp", "copying between two sandboxes is not supported")
	case src.id == "" && dst.id == "":
		return usagef("cp", "one of SRC and DST must be ID:PATH")
	case dst.id != "":
		return c.upload(ctx, src.path, c.client().Sandbox(dst.id), dst.path)
	default:
		return c.download(ctx, c.client().Sandbox(src.id), src.path, dst.path)
	}
}

// upload copies the local file src ("-" for stdin) to dst in sb.
func (c *cli) upload(ctx context.Context, src string, sb *client.Sandbox, dst string) error {
	files := sb.Files()
	var r io.Reader = c.stdin
	var mode os.FileMode
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file; only files are copied", src)
		}
		if runtime.GOOS != "windows" {
			mode = fi.Mode().Perm()
		}
		r = f
		isDir := false
		if !strings.HasSuffix(dst, "/") {
			fe, err := files.Stat(ctx, dst)
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				return fmt.Errorf("stat %s:%s: %w", sb.ID, dst, err)
			}
			isDir = err == nil && fe.Type == api.FileTypeDir
		}
		dst = intoDir(dst, filepath.Base(src), isDir)
	} else if strings.HasSuffix(dst, "/") {
		return usagef("cp", "DST %s:%s is a directory; name the file to write stdin to", sb.ID, dst)
	}
	if _, err := files.WriteFrom(ctx, dst, r, mode); err != nil {
		return fmt.Errorf("write %s:%s: %w", sb.ID, dst, err)
	}
	return nil
}

// download copies the file src in sb to the local path dst ("-" for
// stdout). The local file is written under a temporary name and renamed,
// so a failed copy leaves no partial file.
func (c *cli) download(ctx context.Context, sb *client.Sandbox, src, dst string) error {
	files := sb.Files()
	fe, err := files.Stat(ctx, src)
	if err != nil {
		return fmt.Errorf("stat %s:%s: %w", sb.ID, src, err)
	}
	if fe.Type != api.FileTypeFile {
		return fmt.Errorf("%s:%s is a %s; only files are copied", sb.ID, src, fe.Type)
	}
	if dst == "-" {
		if _, err := files.ReadTo(ctx, src, c.stdout); err != nil {
			return fmt.Errorf("read %s:%s: %w", sb.ID, src, err)
		}
		return nil
	}
	if strings.HasSuffix(dst, "/") || strings.HasSuffix(dst, string(filepath.Separator)) {
		dst = filepath.Join(dst, path.Base(src))
	} else if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, path.Base(src))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".paddock-cp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := files.ReadTo(ctx, src, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("read %s:%s: %w", sb.ID, src, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if mode, ok := parseMode(fe.Mode); ok && runtime.GOOS != "windows" {
		if err := os.Chmod(tmp.Name(), mode); err != nil {
			return err
		}
	}
	return os.Rename(tmp.Name(), dst)
}
