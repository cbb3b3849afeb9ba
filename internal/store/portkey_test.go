package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestPortKeyMigration checks that the port-URL key moves from the file
// older daemons kept into the database once, and stays the same after.
func TestPortKeyMigration(t *testing.T) {
	legacyKey := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		name     string
		file     []byte // the legacy file's content; nil = no file
		wantSame bool   // the key is the legacy one
	}{
		{name: "fresh state dir"},
		{name: "legacy file", file: legacyKey, wantSame: true},
		{name: "corrupt legacy file", file: []byte("short")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			legacy := filepath.Join(dir, legacyPortKeyFile)
			if tc.file != nil {
				os.WriteFile(legacy, tc.file, 0o600)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			k1, err := s.PortKey()
			if err != nil {
				t.Fatal(err)
			}
			if len(k1) != 32 || bytes.Equal(k1, legacyKey) != tc.wantSame {
				t.Fatalf("key %x, want the legacy key: %v", k1, tc.wantSame)
			}
			if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("legacy file still there: %v", err)
			}
			s.Close()
			// A later start reads the same key from the database.
			s, err = Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			k2, err := s.PortKey()
			if err != nil || !bytes.Equal(k1, k2) {
				t.Fatalf("after reopen key %x (%v), want %x", k2, err, k1)
			}
		})
	}
}
