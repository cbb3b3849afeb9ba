package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// portKeyName is the meta key of the port-URL signing key.
var portKeyName = []byte("port-token-key")

// legacyPortKeyFile is where daemons before the key moved into the
// database kept it, relative to the state directory.
const legacyPortKeyFile = "port-token.key"

// PortKey returns the daemon's 32-byte key for signed port URLs, creating
// it on first use. A key left in <state-dir>/port-token.key by an older
// daemon is taken over once (so URLs it signed stay valid) and the file
// deleted after the database holds the key.
func (s *Store) PortKey() ([]byte, error) {
	var key []byte
	legacy := filepath.Join(s.dir, legacyPortKeyFile)
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(portKeyName); len(v) == 32 {
			key = append([]byte(nil), v...)
			return nil
		}
		b, err := os.ReadFile(legacy)
		switch {
		case err == nil && len(b) == 32:
			key = b
		case err == nil || errors.Is(err, fs.ErrNotExist):
			key = make([]byte, 32)
			rand.Read(key)
		default:
			return err
		}
		return meta.Put(portKeyName, key)
	})
	if err != nil {
		return nil, fmt.Errorf("port key: %w", err)
	}
	if err := os.Remove(legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("port key: remove %s: %w", legacy, err)
	}
	return key, nil
}
