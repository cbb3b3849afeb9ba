package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/paddock-sandbox/paddock/api"
)

// Kinds of recipe steps.
const (
	StepRun     = "run"
	StepCopy    = "copy"
	StepEnv     = "env"
	StepWorkdir = "workdir"
	StepUser    = "user"
	StepCmd     = "cmd"
	StepApt     = "apt"
	StepPip     = "pip"
	StepNpm     = "npm"
)

// MaxRecipeSteps bounds a recipe's steps (each file-changing step is a
// layer, and an image has at most Limits.Layers layers).
const MaxRecipeSteps = 100

// StepKind returns which field of s is set, or an error unless exactly
// one is.
func StepKind(s api.RecipeStep) (string, error) {
	var kinds []string
	add := func(set bool, k string) {
		if set {
			kinds = append(kinds, k)
		}
	}
	add(s.Run != "", StepRun)
	add(s.Copy != nil, StepCopy)
	add(len(s.Env) > 0, StepEnv)
	add(s.Workdir != "", StepWorkdir)
	add(s.User != "", StepUser)
	add(len(s.Cmd) > 0, StepCmd)
	add(len(s.Apt) > 0, StepApt)
	add(len(s.Pip) > 0, StepPip)
	add(len(s.Npm) > 0, StepNpm)
	if len(kinds) != 1 {
		return "", fmt.Errorf("%w: a step needs exactly one of run, copy, env, workdir, user, cmd, apt, pip, npm (has %d)", ErrInvalid, len(kinds))
	}
	return kinds[0], nil
}

// ChangesFiles reports whether a step of kind k runs in a sandbox and
// makes a layer (the others change only the config).
func ChangesFiles(k string) bool {
	switch k {
	case StepEnv, StepWorkdir, StepUser, StepCmd:
		return false
	}
	return true
}

// pkgName is what apt, pip and npm steps accept as a package: a name,
// optionally with a version or constraint, never an option.
var pkgName = regexp.MustCompile(`^[A-Za-z0-9@][A-Za-z0-9@._+:/=<>~^*!,-]{0,199}$`)

// ValidateRecipe checks a recipe's shape (not whether its from exists).
func ValidateRecipe(r *api.Recipe) error {
	if strings.TrimSpace(r.From) == "" {
		return fmt.Errorf("%w: recipe.from is required", ErrInvalid)
	}
	if len(r.Steps) > MaxRecipeSteps {
		return fmt.Errorf("%w: at most %d recipe steps", ErrInvalid, MaxRecipeSteps)
	}
	for i, s := range r.Steps {
		k, err := StepKind(s)
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		if err := validateStep(k, s); err != nil {
			return fmt.Errorf("%w: step %d (%s): %v", ErrInvalid, i+1, k, err)
		}
	}
	return nil
}

func validateStep(k string, s api.RecipeStep) error {
	switch k {
	case StepRun:
		if strings.ContainsRune(s.Run, 0) {
			return fmt.Errorf("command contains a NUL byte")
		}
	case StepCopy:
		c := s.Copy
		n := 0
		for _, set := range []bool{c.Content != "", len(c.SrcBase64) > 0, len(c.TarBase64) > 0} {
			if set {
				n++
			}
		}
		if n > 1 {
			return fmt.Errorf("set one of content, src_base64 and tar_base64")
		}
		if c.Dst == "" || strings.ContainsRune(c.Dst, 0) {
			return fmt.Errorf("dst is required")
		}
		if c.Mode != "" {
			if _, err := ParseMode(c.Mode); err != nil {
				return err
			}
		}
	case StepEnv:
		for k, v := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return fmt.Errorf("bad variable %q", k)
			}
		}
	case StepWorkdir:
		if strings.ContainsRune(s.Workdir, 0) {
			return fmt.Errorf("bad workdir")
		}
	case StepUser:
		if strings.ContainsAny(s.User, "\x00\n") {
			return fmt.Errorf("bad user")
		}
	case StepApt, StepPip, StepNpm:
		for _, p := range append(append(append([]string(nil), s.Apt...), s.Pip...), s.Npm...) {
			if !pkgName.MatchString(p) {
				return fmt.Errorf("bad package name %q", p)
			}
		}
	}
	return nil
}

// ParseMode parses an octal file mode such as "0755".
func ParseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("%w: mode %q is not an octal mode", ErrInvalid, s)
	}
	return uint32(m), nil
}

// StepKey is the cache key of step s applied on top of parent (a key).
func StepKey(parent string, s api.RecipeStep) string {
	b, _ := json.Marshal(s)
	h := sha256.New()
	fmt.Fprintf(h, "paddock-step-v1\n%s\n", parent)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// FromKey is the cache key of a build's starting point: the owner (caches
// are per key), the parent's identity and its runtime.
func FromKey(owner, identity, runtime string) string {
	h := sha256.Sum256([]byte("paddock-from-v1\n" + owner + "\n" + identity + "\n" + runtime))
	return hex.EncodeToString(h[:])
}

// ShellCommand is the /bin/sh command a run, apt, pip or npm step runs.
func ShellCommand(k string, s api.RecipeStep) string {
	switch k {
	case StepApt:
		return "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update; " +
			"apt-get install -y --no-install-recommends " + shellQuote(s.Apt...) + "; rm -rf /var/lib/apt/lists/*"
	case StepPip:
		return "set -e; if command -v pip3 >/dev/null 2>&1; then PIP=pip3; else PIP=pip; fi; " +
			"$PIP install --no-cache-dir " + shellQuote(s.Pip...)
	case StepNpm:
		return "npm install -g --no-fund --no-audit " + shellQuote(s.Npm...)
	}
	return s.Run
}

// NeedsNetwork reports whether a step of kind k downloads packages.
func NeedsNetwork(k string) bool { return k == StepApt || k == StepPip || k == StepNpm }

// shellQuote quotes each word for /bin/sh.
func shellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Describe renders a step as a short, Dockerfile-like line for logs.
func Describe(s api.RecipeStep) string {
	k, err := StepKind(s)
	if err != nil {
		return "?"
	}
	short := func(x string) string {
		x = strings.Join(strings.Fields(x), " ")
		if len(x) > 200 {
			x = x[:197] + "..."
		}
		return x
	}
	switch k {
	case StepRun:
		return "RUN " + short(s.Run)
	case StepCopy:
		switch {
		case len(s.Copy.TarBase64) > 0:
			return fmt.Sprintf("COPY (archive, %d bytes) %s", len(s.Copy.TarBase64), s.Copy.Dst)
		case len(s.Copy.SrcBase64) > 0:
			return fmt.Sprintf("COPY (%d bytes) %s", len(s.Copy.SrcBase64), s.Copy.Dst)
		}
		return fmt.Sprintf("COPY (%d bytes) %s", len(s.Copy.Content), s.Copy.Dst)
	case StepEnv:
		var kv []string
		for _, k := range sortedKeys(s.Env) {
			kv = append(kv, k+"="+s.Env[k])
		}
		return "ENV " + short(strings.Join(kv, " "))
	case StepWorkdir:
		return "WORKDIR " + s.Workdir
	case StepUser:
		return "USER " + s.User
	case StepCmd:
		b, _ := json.Marshal(s.Cmd)
		return "CMD " + short(string(b))
	case StepApt:
		return "APT " + strings.Join(s.Apt, " ")
	case StepPip:
		return "PIP " + strings.Join(s.Pip, " ")
	}
	return "NPM " + strings.Join(s.Npm, " ")
}

// ApplyConfig returns cfg changed by a config-only step.
func ApplyConfig(cfg ImageConfig, k string, s api.RecipeStep) ImageConfig {
	switch k {
	case StepEnv:
		env := append([]string(nil), cfg.Env...)
		for _, key := range sortedKeys(s.Env) {
			env = SetEnv(env, key, s.Env[key])
		}
		cfg.Env = env
	case StepWorkdir:
		cfg.WorkingDir = ResolveDir(cfg.WorkingDir, s.Workdir)
	case StepUser:
		cfg.User = s.User
	case StepCmd:
		cfg.Cmd = append([]string(nil), s.Cmd...)
	}
	return cfg
}

// SetEnv sets key in a KEY=VALUE list, replacing an earlier value.
func SetEnv(env []string, key, value string) []string {
	for i, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

// ResolveDir resolves p against the working directory wd ("" is "/").
func ResolveDir(wd, p string) string {
	if wd == "" {
		wd = "/"
	}
	if !path.IsAbs(p) {
		p = path.Join(wd, p)
	}
	return path.Clean(p)
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// IsReference reports whether s parses as a registry image reference.
func IsReference(s string) bool {
	_, err := name.ParseReference(s)
	return err == nil
}
