package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// parseArgs parses the flags in args into fs wherever they appear and
// returns the positional arguments in order. "--" ends flag parsing. When
// cmdAt >= 0, the positional argument at index cmdAt starts a command line:
// it and everything after it are returned verbatim, so that
// "paddock exec ID ls -la" passes -la to ls. -h, -help and --help return
// flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string, cmdAt int) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			if cmdAt >= 0 && len(pos) == cmdAt {
				return append(pos, args[i:]...), nil
			}
			pos = append(pos, a)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		value, hasValue := "", false
		if j := strings.IndexByte(name, '='); j >= 0 {
			name, value, hasValue = name[:j], name[j+1:], true
		}
		if name == "h" || name == "help" {
			return nil, flag.ErrHelp
		}
		f := fs.Lookup(name)
		if f == nil || name == "" || strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("unknown flag %s", a)
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if err := fs.Set(name, value); err != nil {
			return nil, fmt.Errorf("invalid value %q for --%s: %w", value, name, err)
		}
	}
	return pos, nil
}

// kvList collects repeated K=V flags such as --env and --meta.
type kvList []string

func (l *kvList) String() string { return strings.Join(*l, ",") }

func (l *kvList) Set(s string) error {
	if s == "" || strings.HasPrefix(s, "=") {
		return errors.New("want KEY=VALUE")
	}
	*l = append(*l, s)
	return nil
}

// toMap turns K=V items into a map; a later key wins. An item without "="
// takes its value from lookup (the local environment for --env); it is an
// error when lookup is nil or finds nothing. An empty list gives nil.
func (l kvList) toMap(lookup func(string) (string, bool)) (map[string]string, error) {
	if len(l) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(l))
	for _, item := range l {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			if lookup == nil {
				return nil, fmt.Errorf("%q: want KEY=VALUE", item)
			}
			if v, ok = lookup(k); !ok {
				return nil, fmt.Errorf("%q: not set in the local environment", k)
			}
		}
		m[k] = v
	}
	return m, nil
}

// formatKV formats a map as sorted "k=v" pairs joined by sep, or "" when
// it is empty.
func formatKV(m map[string]string, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, sep)
}

// seconds is a flag holding a duration in seconds, given as a number
// ("30", "1.5") or a Go duration ("5m", "1h30m").
type seconds float64

func (s *seconds) String() string {
	return strconv.FormatFloat(float64(*s), 'f', -1, 64)
}

func (s *seconds) Set(v string) error {
	n, err := parseSeconds(v)
	if err != nil {
		return err
	}
	*s = seconds(n)
	return nil
}

// whole rounds s up to whole seconds.
func (s seconds) whole() int64 { return int64(math.Ceil(float64(s))) }

// parseSeconds parses a number of seconds or a Go duration; the result is
// not negative.
func parseSeconds(v string) (float64, error) {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		d, derr := time.ParseDuration(v)
		if derr != nil {
			return 0, errors.New("want seconds (30) or a duration (5m)")
		}
		n = d.Seconds()
	}
	if n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, errors.New("want a duration of zero or more")
	}
	return n, nil
}

// flagWasSet reports whether the flag name was given on the command line.
func flagWasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
